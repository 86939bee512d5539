"""``cap(S)``: the most records of some reconstruction that can hold itemset S.

Two ways to the same figure: :func:`caps_small` with sparse products and array joins for
itemsets of one or two codes, :func:`caps_general` by direct enumeration for any size (the
tests hold the two equal).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
from scipy import sparse

from ehr_release.privacy.disassociation.arrays import cross_within, lookup, pairs_within
from ehr_release.privacy.disassociation.tables import Tables
from ehr_release.privacy.itemset_counts import Itemset


def _chunk_code_pairs(group: np.ndarray, code: np.ndarray, chunk: np.ndarray,
                      value: np.ndarray, k2: np.ndarray, n2: np.ndarray, c: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """cap terms of code pairs inside one group whose codes sit in chunks.

    Same chunk: the pair's count there; different chunks: the smaller support.
    Rows must be sorted by group.
    """
    indptr = np.r_[0, np.cumsum(np.bincount(group))] if len(group) else np.zeros(1, np.int64)
    a, b = pairs_within(indptr.astype(np.int64))
    x, y = np.minimum(code[a], code[b]), np.maximum(code[a], code[b])
    same = chunk[a] == chunk[b]
    together = lookup(k2, n2, chunk[a] * c * c + x * c + y)
    return x * c + y, np.where(same, together, np.minimum(value[a], value[b]))


def caps_small(t: Tables, k2: np.ndarray, n2: np.ndarray, pair_keys: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """cap of every code (dense) and of every pair in ``pair_keys`` (x·C + y, sorted)."""
    c = len(t.codes)
    cap1 = np.bincount(t.dom_code, weights=t.dom_value, minlength=c) \
        + np.bincount(t.sh_code, weights=t.sh_value, minlength=c)
    cap2 = np.zeros(len(pair_keys), dtype=np.float64)
    if not len(pair_keys):
        return cap1, cap2
    qx, qy = pair_keys // c, pair_keys % c
    n_clusters = len(t.cluster_size)
    item = t.dom_chunk < 0
    shape = (n_clusters, c)
    items = sparse.csr_matrix((np.ones(item.sum()), (t.dom_cluster[item], t.dom_code[item])),
                              shape=shape)
    weighted = sparse.csr_matrix((t.cluster_size[t.dom_cluster[item]].astype(float),
                                  (t.dom_cluster[item], t.dom_code[item])), shape=shape)
    chunked = sparse.csr_matrix((t.dom_value[~item].astype(float),
                                 (t.dom_cluster[~item], t.dom_code[~item])), shape=shape)
    both_items = (items.T @ weighted).tocsr()              # Σ |P| over P with x, y items
    chunk_item = (chunked.T @ items).tocsr()               # Σ sup_P(x) over P, y an item
    cap2 += np.asarray(both_items[qx, qy]).ravel()
    cap2 += np.asarray(chunk_item[qx, qy]).ravel() + np.asarray(chunk_item[qy, qx]).ravel()
    terms_k: list[np.ndarray] = []
    terms_v: list[np.ndarray] = []
    rec = ~item
    kk, vv = _chunk_code_pairs(t.dom_cluster[rec], t.dom_code[rec], t.dom_chunk[rec],
                               t.dom_value[rec], k2, n2, c)
    terms_k.append(kk)
    terms_v.append(vv)
    if len(t.sh_joint):
        order = np.lexsort((t.sh_code, t.sh_joint))
        sj, sc, sg, sv = (t.sh_joint[order], t.sh_code[order], t.sh_chunk[order],
                          t.sh_value[order])
        kk, vv = _chunk_code_pairs(sj, sc, sg, sv, k2, n2, c)
        terms_k.append(kk)
        terms_v.append(vv)
        # a shared code with a member's own code: min(sup_shared, Σ_P cap_P({y}))
        dj = t.joint_of_cluster[t.dom_cluster]
        inj = dj >= 0
        key, inv = np.unique(dj[inj] * c + t.dom_code[inj], return_inverse=True)
        own = np.bincount(inv, weights=t.dom_value[inj])
        own_joint, own_code = key // c, key % c
        ia, ib = cross_within(sj, own_joint)
        x, y = sc[ia], own_code[ib]
        terms_k.append(np.minimum(x, y) * c + np.maximum(x, y))
        terms_v.append(np.minimum(sv[ia], own[ib]))
    keys = np.concatenate(terms_k)
    vals = np.concatenate(terms_v).astype(float)
    pos = np.searchsorted(pair_keys, keys)
    pos = np.minimum(pos, len(pair_keys) - 1)
    hit = pair_keys[pos] == keys
    cap2 += np.bincount(pos[hit], weights=vals[hit], minlength=len(pair_keys))
    return cap1, cap2


# --------------------------------------------------------------------------- cap, general path
def caps_general(t: Tables, chunk_counts: list[Counter[Itemset]],
                 itemsets: Iterable[Itemset]) -> dict[Itemset, int]:
    """cap(S) by direct enumeration over the clusters whose domain holds S.

    A cluster outside a joint, or in one whose shared chunks miss S, gives the smallest
    support of S's parts in its record chunks (its size if S is all in its item chunk); a
    joint cluster whose shared chunks meet S gives min(supply, demand): the shared chunks'
    smallest support of their part of S, and what its members give the rest.

    Why the shape: a release with m = 3 asks this for every itemset of up to three codes of
    the original (10^5 of them for 600 records), and each meets many joints through a
    common code. So the clusters holding a set of codes are one intersection of per-code
    sets (smallest first), a supply of 0 skips its demand (the minimum is 0 whatever the
    demand), and an empty rest's demand is the members' sizes, summed once per joint.
    """
    n_clusters = len(t.cluster_size)
    where: list[dict[int, int]] = [{} for _ in range(n_clusters)]  # code -> chunk (-1 item)
    for p, code, g in zip(t.dom_cluster.tolist(), t.dom_code.tolist(), t.dom_chunk.tolist(),
                          strict=True):
        where[p][code] = g
    joint_of = t.joint_of_cluster.tolist()
    n_joints = max(joint_of) + 1 if n_clusters else 0
    shared: list[dict[int, int]] = [{} for _ in range(n_joints)]
    for j, code, g in zip(t.sh_joint.tolist(), t.sh_code.tolist(), t.sh_chunk.tolist(),
                          strict=True):
        shared[j][code] = g
    members: list[set[int]] = [set() for _ in range(n_joints)]
    for p, j in enumerate(joint_of):
        if j >= 0:
            members[j].add(p)
    sizes = t.cluster_size.tolist()
    members_size = [sum(sizes[p] for p in ps) for ps in members]
    holders: dict[int, set[int]] = {}
    for p, dom in enumerate(where):
        for code in dom:
            holders.setdefault(code, set()).add(p)
    joint_holders: dict[int, set[int]] = {}
    for j, dom in enumerate(shared):
        for code in dom:
            joint_holders.setdefault(code, set()).add(j)
    nobody: frozenset[int] = frozenset()

    def holding(codes: Itemset) -> set[int] | frozenset[int]:
        """The clusters whose domain holds every code of ``codes`` (at least one code)."""
        sets = sorted((holders.get(code, nobody) for code in codes), key=len)
        return sets[0].intersection(*sets[1:])

    def chunk_min(location: dict[int, int], s: Itemset, full: int) -> int:
        parts: dict[int, list[int]] = {}
        for code in s:
            if location[code] >= 0:
                parts.setdefault(location[code], []).append(code)
        return min((chunk_counts[g][tuple(sorted(cs))] for g, cs in parts.items()),
                   default=full)

    out: dict[Itemset, int] = {}
    for s in itemsets:
        total = 0
        touched = set().union(*(joint_holders.get(code, ()) for code in s))
        for p in holding(s):
            if joint_of[p] not in touched:  # no joint, or one whose shared chunks miss S
                total += chunk_min(where[p], s, sizes[p])
        for j in touched:
            inside = tuple(code for code in s if code in shared[j])
            supply = chunk_min(shared[j], inside, 0)
            if supply == 0:
                continue
            rest = tuple(code for code in s if code not in shared[j])
            if not rest:
                demand = members_size[j]
            else:
                demand = sum(chunk_min(where[p], rest, sizes[p])
                             for p in members[j].intersection(holding(rest)))
            total += min(supply, demand)
        out[s] = total
    return out
