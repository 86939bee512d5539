"""Independent verifier of a disassociated release (``release.json``) against the original.

It shares no code with ``ehr_release.algorithms``: it parses the published bytes itself and
re-derives every figure from them and from the original dataset (spec, "Verifying").

Requirements checked
--------------------
1. *format* — the JSON has the published shape and declares the requested k and m.
2. *structure* — every cluster has ≥ k records and together they hold |D| records; every
   record chunk lists ``size`` subrecords and every shared chunk one per record of its joint
   cluster; inside a cluster the record-chunk domains, the item chunk and the shared domains
   are pairwise disjoint; a cluster belongs to at most one joint cluster.
3. *chunk k^m-anonymity* — in every record and shared chunk, each itemset of ≤ m codes that
   occurs is held by ≥ k subrecords.
4. *Guarantee 1* — for every itemset S of ≤ m codes of an original record, the largest number
   of records of some reconstruction that contain S (``cap(S)``, below) is ≥ k.
5. *truthfulness* — the release is consistent with the original: every published count is
   at most the original one, and every original count is at most ``cap``. The release does
   not say which patient went to which cluster (publishing it would help the attacker), so
   losslessness is checked through these count bounds on all itemsets of ≤ m codes.

``cap(S)`` sums over clusters P: 0 if S is not inside P's domain, |P| if S lies in the item
chunk, otherwise the smallest support of S ∩ Ti over the record chunks Ci meeting S. A joint
cluster J with shared codes Ts meeting S gives ``min(sup_shared(S ∩ Ts), Σ_P cap_P(S \\ Ts))``
instead of its members' terms. For m ≤ 2 the sums are computed with sparse matrix products
and array joins; for larger m by a direct (slower) enumeration, which the tests also use to
cross-check the fast path.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from ehr_release.dataset import CODE, PATIENT_ID, Dataset
from ehr_release.mapping import MapFn
from ehr_release.privacy.itemset_counts import Itemset, count_itemsets
from ehr_release.reports import Requirement, VerificationReport

NAME = "disassociation"
RELEASE_FILE = "release.json"
MAX_EVIDENCE = 5


class ReleaseRejected(Exception):
    """The release cannot be read as a disassociated dataset; says what and where."""


# --------------------------------------------------------------------------- parsing
@dataclass(frozen=True)
class ParsedCluster:
    """A cluster as published; subrecords stay the JSON lists (checked while flattening)."""

    id: str
    size: int
    chunks: list[list[list[str]]]
    items: list[str]


@dataclass(frozen=True)
class ParsedJoint:
    members: tuple[str, ...]
    chunks: list[list[list[str]]]


@dataclass(frozen=True)
class ParsedRelease:
    k: int
    m: int
    clusters: list[ParsedCluster]
    joints: list[ParsedJoint]


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise ReleaseRejected(what)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _chunk_list(raw: Any, where: str) -> list[list[list[str]]]:
    _expect(isinstance(raw, list) and all(type(ch) is list for ch in raw),
            f"{where} is not a list of chunks")
    return raw


def parse_release(files: dict[str, bytes]) -> ParsedRelease:
    """Read ``release.json``; raise :class:`ReleaseRejected` if its shape is wrong.

    Subrecords are checked when :func:`build_tables` flattens them (one pass, not two).
    """
    _expect(RELEASE_FILE in files, f"the release has no {RELEASE_FILE}")
    try:
        doc = json.loads(files[RELEASE_FILE])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleaseRejected(f"{RELEASE_FILE} is not valid JSON ({exc})") from None
    _expect(isinstance(doc, dict), "the release is not a JSON object")
    _expect(doc.get("algorithm") == NAME, f"algorithm is {doc.get('algorithm')!r}, not {NAME!r}")
    for key in ("k", "m"):
        _expect(_is_int(doc.get(key)), f"{key!r} is not an integer")
    _expect(isinstance(doc.get("clusters"), list), "'clusters' is not a list")
    _expect(isinstance(doc.get("joint_clusters", []), list), "'joint_clusters' is not a list")
    clusters = []
    for c in doc["clusters"]:
        _expect(isinstance(c, dict) and isinstance(c.get("id"), str), "a cluster has no id")
        cid = c["id"]
        _expect(_is_int(c.get("size")), f"cluster {cid}: size is not an integer")
        items = c.get("item_chunk")
        _expect(isinstance(items, list) and all(isinstance(t, str) for t in items),
                f"cluster {cid}: item_chunk is not a list of codes")
        _expect(len(set(items)) == len(items), f"cluster {cid}: item_chunk repeats a code")
        chunks = _chunk_list(c.get("record_chunks"), f"cluster {cid}: record_chunks")
        clusters.append(ParsedCluster(cid, c["size"], chunks, items))
    joints = []
    for i, j in enumerate(doc.get("joint_clusters", [])):
        _expect(isinstance(j, dict) and isinstance(j.get("clusters"), list)
                and all(isinstance(x, str) for x in j["clusters"]),
                f"joint cluster {i + 1}: 'clusters' is not a list of ids")
        chunks = _chunk_list(j.get("shared_chunks"), f"joint cluster {i + 1}: shared_chunks")
        joints.append(ParsedJoint(tuple(j["clusters"]), chunks))
    return ParsedRelease(doc["k"], doc["m"], clusters, joints)


# --------------------------------------------------------------------------- structure
def shape_problems(rel: ParsedRelease, n_original: int, k: int) -> list[str]:
    """Sizes, chunk lengths and joint-cluster membership (everything but code domains)."""
    problems: list[str] = []
    ids = [c.id for c in rel.clusters]
    if len(set(ids)) != len(ids):
        problems.append("cluster ids are not unique")
    size_of = {c.id: c.size for c in rel.clusters}
    total = sum(c.size for c in rel.clusters)
    if total != n_original:
        problems.append(f"clusters hold {total:,} records, the original has {n_original:,}")
    for c in rel.clusters:
        if c.size < k:
            problems.append(f"cluster {c.id} has {c.size} records (< k = {k})")
        for i, chunk in enumerate(c.chunks):
            if len(chunk) != c.size:
                problems.append(f"cluster {c.id} record chunk {i + 1} lists {len(chunk)} "
                                f"subrecords, expected {c.size}")
    joint_of: dict[str, int] = {}
    for n, j in enumerate(rel.joints):
        missing = [x for x in j.members if x not in size_of]
        if missing:
            problems.append(f"joint cluster {n + 1} names unknown cluster {missing[0]}")
            continue
        if len(set(j.members)) != len(j.members) or len(j.members) < 2:
            problems.append(f"joint cluster {n + 1} must name ≥ 2 distinct clusters")
        for x in j.members:
            if x in joint_of:
                problems.append(f"cluster {x} is in joint clusters {joint_of[x] + 1} and {n + 1}")
            joint_of[x] = n
        size = sum(size_of[x] for x in j.members)
        for i, chunk in enumerate(j.chunks):
            if len(chunk) != size:
                problems.append(f"joint cluster {n + 1} shared chunk {i + 1} lists {len(chunk)} "
                                f"subrecords, expected {size}")
    return problems


def domain_problems(rel: ParsedRelease, t: Tables) -> list[str]:
    """Codes published in two places of one cluster (chunks, item chunk, shared chunks)."""
    c = len(t.codes)
    # each shared code counts as a place of every member cluster of its joint cluster
    in_joint = np.flatnonzero(t.joint_of_cluster >= 0)
    by_joint = in_joint[np.argsort(t.joint_of_cluster[in_joint], kind="stable")]
    counts = np.bincount(t.joint_of_cluster[in_joint], minlength=len(rel.joints))
    starts = np.cumsum(counts) - counts
    rep = counts[t.sh_joint]
    offsets = np.arange(int(rep.sum())) - np.repeat(np.cumsum(rep) - rep, rep)
    sh_cluster = by_joint[np.repeat(starts[t.sh_joint], rep) + offsets]
    cluster = np.concatenate([t.dom_cluster, sh_cluster])
    code = np.concatenate([t.dom_code, np.repeat(t.sh_code, rep)])
    place = np.concatenate([t.dom_chunk, np.repeat(t.sh_chunk, rep)])
    order = np.lexsort((place, code, cluster))
    cluster, code, place = cluster[order], code[order], place[order]
    key = cluster * c + code
    problems = []
    for i in np.flatnonzero(key[1:] == key[:-1])[:MAX_EVIDENCE].tolist():
        where = ["its item chunk" if g < 0 else t.chunk_label[g]
                 for g in (int(place[i]), int(place[i + 1]))]
        problems.append(f"cluster {rel.clusters[int(cluster[i])].id}: code "
                        f"{t.codes[int(code[i])]} is in {where[0]} and {where[1]}")
    return problems


# --------------------------------------------------------------------------- array helpers
def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort: numpy's hash-based ``unique`` is far slower here)."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _pairs_within(indptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions (i, j), i < j, of every pair of elements inside each CSR row."""
    lengths = np.diff(indptr)
    n = int(indptr[-1])
    row = np.repeat(np.arange(len(lengths)), lengths)
    partners = lengths[row] - 1 - (np.arange(n) - indptr[:-1][row])
    first = np.repeat(np.arange(n), partners)
    starts = np.cumsum(partners) - partners
    second = first + 1 + np.arange(len(first)) - np.repeat(starts, partners)
    return first, second


def _cross_within(group_a: np.ndarray, group_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with ``group_a[i] == group_b[j]``; ``group_b`` must be sorted."""
    lo = np.searchsorted(group_b, group_a, "left")
    count = np.searchsorted(group_b, group_a, "right") - lo
    ia = np.repeat(np.arange(len(group_a)), count)
    starts = np.cumsum(count) - count
    ib = np.repeat(lo, count) + np.arange(len(ia)) - np.repeat(starts, count)
    return ia, ib


# --------------------------------------------------------------------------- tables
@dataclass(frozen=True)
class Tables:
    """The release and the original as integer arrays over one code numbering.

    Chunks are numbered globally: record chunks of all clusters, then shared chunks.
    ``dom_*`` rows list, per cluster, every code of its own domain with ``dom_value`` =
    ``cap_P({t})`` (its record-chunk support, or |P| for an item-chunk code) and the chunk
    holding it (-1 for the item chunk). ``sh_*`` rows list, per joint cluster, each shared
    code with its shared chunk and support there.
    """

    codes: list[str]
    cluster_size: np.ndarray
    sub_chunk: np.ndarray
    sub_indptr: np.ndarray
    sub_codes: np.ndarray
    chunk_label: list[str]
    dom_cluster: np.ndarray
    dom_code: np.ndarray
    dom_chunk: np.ndarray
    dom_value: np.ndarray
    joint_of_cluster: np.ndarray
    sh_joint: np.ndarray
    sh_code: np.ndarray
    sh_chunk: np.ndarray
    sh_value: np.ndarray
    orig_indptr: np.ndarray
    orig_codes: np.ndarray


def _original_rows(dataset: Dataset) -> tuple[list[str], np.ndarray, np.ndarray]:
    diag = dataset.diagnoses
    rec = dataset.patients.index.get_indexer(diag[PATIENT_ID])
    code, names = pd.factorize(diag[CODE].astype(str), sort=True)
    n_codes = max(len(names), 1)
    key = _distinct(rec[rec >= 0].astype(np.int64) * n_codes + code[rec >= 0])
    indptr = np.zeros(dataset.n_patients + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // n_codes, minlength=dataset.n_patients), out=indptr[1:])
    return [str(c) for c in names], indptr, key % n_codes


def _flatten(chunks: list[tuple[str, list[list[str]]]]) -> tuple[list[int], list[Any]]:
    """Subrecord lengths and all tokens, chunk after chunk (C-level iteration)."""
    lengths: list[int] = []
    tokens: list[Any] = []
    for label, chunk in chunks:
        _expect(all(type(s) is list for s in chunk), f"{label} holds a subrecord that is not "
                "a list of code strings")
        lengths.extend(map(len, chunk))
        tokens.extend(chain.from_iterable(chunk))
    return lengths, tokens


def build_tables(rel: ParsedRelease, dataset: Dataset) -> Tables:
    """Flatten a release (whose shape passed :func:`shape_problems`) and the original.

    Raises
    ------
    ReleaseRejected
        If a subrecord is not a list of distinct code strings.
    """
    orig_names, orig_indptr, orig_local = _original_rows(dataset)
    labelled = [(f"cluster {c.id} record chunk {i + 1}", ch)
                for c in rel.clusters for i, ch in enumerate(c.chunks)]
    first_shared = len(labelled)
    labelled += [(f"joint cluster {n + 1} shared chunk {i + 1}", ch)
                 for n, j in enumerate(rel.joints) for i, ch in enumerate(j.chunks)]
    chunk_label = [label for label, _ in labelled]
    lengths, tokens = _flatten(labelled)
    item_tokens = [t for c in rel.clusters for t in c.items]
    try:
        released = set(tokens)
    except TypeError:
        raise ReleaseRejected("a subrecord holds something that is not a code string") from None
    _expect(all(type(x) is str for x in released), "a subrecord holds a code that is not a string")
    codes = sorted(set(orig_names) | released | set(item_tokens))
    n_codes = len(codes)
    index = {code: i for i, code in enumerate(codes)}
    orig_codes = np.array([index[x] for x in orig_names], dtype=np.int64)[orig_local] \
        if len(orig_local) else np.zeros(0, dtype=np.int64)

    n_sub = len(lengths)
    sub_indptr = np.zeros(n_sub + 1, dtype=np.int64)
    np.cumsum(lengths, out=sub_indptr[1:])
    ids = np.fromiter(map(index.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    sub_row = np.repeat(np.arange(n_sub, dtype=np.int64), lengths)
    row_key = np.sort(sub_row * n_codes + ids)         # codes sorted inside each subrecord
    repeated = np.flatnonzero(row_key[1:] == row_key[:-1])
    sub_chunk = np.repeat(np.arange(len(labelled), dtype=np.int64),
                          [len(ch) for _, ch in labelled])
    if len(repeated):
        bad = int(sub_chunk[row_key[repeated[0]] // n_codes])
        raise ReleaseRejected(f"{chunk_label[bad]} holds a subrecord repeating a code")
    sub_codes = row_key % n_codes

    # support of each code in each chunk
    owner = sub_chunk[sub_row]
    key, support = np.unique(owner * n_codes + sub_codes, return_counts=True)
    k_chunk, k_code = key // n_codes, key % n_codes
    per_cluster = [len(c.chunks) for c in rel.clusters]
    chunk_cluster = np.concatenate([np.repeat(np.arange(len(rel.clusters)), per_cluster),
                                    np.full(len(labelled) - first_shared, -1)]).astype(np.int64)
    per_joint = [len(j.chunks) for j in rel.joints]
    chunk_joint = np.concatenate([np.full(first_shared, -1),
                                  np.repeat(np.arange(len(rel.joints)), per_joint)]
                                 ).astype(np.int64)

    sizes = np.array([c.size for c in rel.clusters], dtype=np.int64)
    item_cluster = np.repeat(np.arange(len(rel.clusters), dtype=np.int64),
                             [len(c.items) for c in rel.clusters])
    item_code = np.fromiter(map(index.__getitem__, item_tokens), dtype=np.int64,
                            count=len(item_tokens))
    is_rec = k_chunk < first_shared
    dom_cluster = np.concatenate([chunk_cluster[k_chunk[is_rec]], item_cluster])
    dom_code = np.concatenate([k_code[is_rec], item_code])
    dom_chunk = np.concatenate([k_chunk[is_rec], np.full(len(item_code), -1, dtype=np.int64)])
    dom_value = np.concatenate([support[is_rec], sizes[item_cluster]])
    order = np.lexsort((dom_code, dom_cluster))
    position = {c.id: i for i, c in enumerate(rel.clusters)}
    joint_of_cluster = np.full(len(rel.clusters), -1, dtype=np.int64)
    for n, j in enumerate(rel.joints):
        joint_of_cluster[[position[x] for x in j.members]] = n
    sh = ~is_rec
    return Tables(codes, sizes, sub_chunk, sub_indptr, sub_codes, chunk_label,
                  dom_cluster[order], dom_code[order], dom_chunk[order], dom_value[order],
                  joint_of_cluster, chunk_joint[k_chunk[sh]], k_code[sh], k_chunk[sh],
                  support[sh], orig_indptr, orig_codes)


# --------------------------------------------------------------------------- counts


def chunk_counts_small(t: Tables) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Counts of every 1- and 2-itemset inside each chunk (keys are chunk·C + code, and
    chunk·C² + x·C + y with x < y)."""
    c = len(t.codes)
    owner = np.repeat(t.sub_chunk, np.diff(t.sub_indptr))
    k1, n1 = np.unique(owner * c + t.sub_codes, return_counts=True)
    a, b = _pairs_within(t.sub_indptr)
    k2, n2 = np.unique(owner[a] * c * c + t.sub_codes[a] * c + t.sub_codes[b],
                       return_counts=True)
    return k1, n1, k2, n2


def chunk_counts_general(t: Tables, m: int, map_fn: MapFn | None = None
                         ) -> list[Counter[Itemset]]:
    """Per chunk, the count of every itemset of 1..m codes occurring in it."""
    by_chunk = count_itemsets(t.sub_indptr, t.sub_codes, t.sub_chunk, m, map_fn)
    return [by_chunk.get(g, Counter()) for g in range(len(t.chunk_label))]


def original_counts_small(t: Tables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Support in D of every code (dense) and every co-occurring pair (sorted keys x·C + y)."""
    c = len(t.codes)
    single = np.bincount(t.orig_codes, minlength=c)
    a, b = _pairs_within(t.orig_indptr)
    k2, n2 = np.unique(t.orig_codes[a] * c + t.orig_codes[b], return_counts=True)
    return single, k2, n2


def original_counts_general(t: Tables, m: int, map_fn: MapFn | None = None
                            ) -> Counter[Itemset]:
    """Support in D of every itemset of 1..m codes of some original record."""
    return count_itemsets(t.orig_indptr, t.orig_codes, None, m, map_fn).get(0, Counter())


# --------------------------------------------------------------------------- cap, fast path
def _lookup(sorted_keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at ``query`` keys (0 where a key is absent)."""
    if not len(sorted_keys):
        return np.zeros(len(query), dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_keys, query), len(sorted_keys) - 1)
    return np.where(sorted_keys[pos] == query, values[pos], 0)


def _chunk_code_pairs(group: np.ndarray, code: np.ndarray, chunk: np.ndarray,
                      value: np.ndarray, k2: np.ndarray, n2: np.ndarray, c: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """cap terms of code pairs inside one group whose codes sit in chunks.

    Same chunk: the pair's count there; different chunks: the smaller support.
    Rows must be sorted by group.
    """
    indptr = np.r_[0, np.cumsum(np.bincount(group))] if len(group) else np.zeros(1, np.int64)
    a, b = _pairs_within(indptr.astype(np.int64))
    x, y = np.minimum(code[a], code[b]), np.maximum(code[a], code[b])
    same = chunk[a] == chunk[b]
    together = _lookup(k2, n2, chunk[a] * c * c + x * c + y)
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
        ia, ib = _cross_within(sj, own_joint)
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
    """cap(S) by direct enumeration over the clusters whose domain holds S."""
    n_clusters = len(t.cluster_size)
    where: list[dict[int, int]] = [{} for _ in range(n_clusters)]  # code -> chunk (-1 item)
    for p, code, g in zip(t.dom_cluster.tolist(), t.dom_code.tolist(), t.dom_chunk.tolist(),
                          strict=True):
        where[p][code] = g
    n_joints = int(t.joint_of_cluster.max()) + 1 if n_clusters else 0
    shared: list[dict[int, int]] = [{} for _ in range(n_joints)]
    for j, code, g in zip(t.sh_joint.tolist(), t.sh_code.tolist(), t.sh_chunk.tolist(),
                          strict=True):
        shared[j][code] = g
    members: list[list[int]] = [[] for _ in range(n_joints)]
    for p, j in enumerate(t.joint_of_cluster.tolist()):
        if j >= 0:
            members[j].append(p)
    holders: dict[int, set[int]] = {}
    for p, dom in enumerate(where):
        for code in dom:
            holders.setdefault(code, set()).add(p)
    joint_holders: dict[int, set[int]] = {}
    for j, dom in enumerate(shared):
        for code in dom:
            joint_holders.setdefault(code, set()).add(j)
    sizes = t.cluster_size.tolist()

    def chunk_min(location: dict[int, int], s: Itemset, full: int) -> int:
        parts: dict[int, list[int]] = {}
        for code in s:
            if location[code] >= 0:
                parts.setdefault(location[code], []).append(code)
        return min((chunk_counts[g][tuple(sorted(cs))] for g, cs in parts.items()),
                   default=full)

    def cap_cluster(p: int, s: Itemset) -> int:
        if not all(code in where[p] for code in s):
            return 0
        return chunk_min(where[p], s, sizes[p])

    out: dict[Itemset, int] = {}
    for s in itemsets:
        total = 0
        candidates = set.intersection(*(holders.get(code, set()) for code in s))
        for p in candidates:
            j = int(t.joint_of_cluster[p])
            if j < 0 or not any(code in shared[j] for code in s):
                total += cap_cluster(p, s)
        touched = set().union(*(joint_holders.get(code, set()) for code in s))
        for j in touched:
            inside = tuple(code for code in s if code in shared[j])
            rest = tuple(code for code in s if code not in shared[j])
            supply = chunk_min(shared[j], inside, 0)
            demand = sum(cap_cluster(p, rest) for p in members[j])
            total += min(supply, demand)
        out[s] = total
    return out


# --------------------------------------------------------------------------- the checks
@dataclass(frozen=True)
class Findings:
    """The figures behind the requirements (also handy for tests and the benchmark)."""

    weakest_chunk_itemset: tuple[str, ...] | None
    weakest_chunk_support: int | None
    weakest_chunk: str | None
    weakest_itemset: tuple[str, ...] | None
    weakest_cap: int | None
    itemsets_checked: int
    untruthful: list[str]


def _names(t: Tables, s: Iterable[int]) -> tuple[str, ...]:
    return tuple(t.codes[i] for i in s)


def analyse(rel: ParsedRelease, dataset: Dataset, m: int, *, general: bool | None = None
            ) -> Findings:
    """Chunk anonymity, Guarantee 1 and truthfulness figures for a well-formed release."""
    return analyse_tables(build_tables(rel, dataset), m, general=general)


def analyse_tables(t: Tables, m: int, *, general: bool | None = None,
                   map_fn: MapFn | None = None) -> Findings:
    """As :func:`analyse` on built tables; ``general=None`` picks the fast path for m ≤ 2,
    ``True`` forces the direct enumeration, whose counting ``map_fn`` may spread out."""
    if general is None:
        general = m > 2
    return _analyse_general(t, m, map_fn) if general else _analyse_small(t, m)


def _analyse_small(t: Tables, m: int) -> Findings:
    c = len(t.codes)
    k1, n1, k2, n2 = chunk_counts_small(t)
    if m < 2:
        k2, n2 = k2[:0], n2[:0]
    weak: tuple[tuple[str, ...], int, str] | None = None
    if len(n1):
        i = int(np.argmin(n1))
        weak = (_names(t, [k1[i] % c]), int(n1[i]), t.chunk_label[k1[i] // c])
    if len(n2) and (weak is None or n2.min() < weak[1]):
        i = int(np.argmin(n2))
        weak = (_names(t, [(k2[i] // c) % c, k2[i] % c]), int(n2[i]),
                t.chunk_label[k2[i] // (c * c)])
    single, q2, s2 = original_counts_small(t)
    if m < 2:
        q2, s2 = q2[:0], s2[:0]
    cap1, cap2 = caps_small(t, k2, n2, q2)
    present = np.flatnonzero(single)
    candidates = [(float(cap1[x]), _names(t, [x])) for x in present[np.argsort(cap1[present])[:1]]]
    if len(q2):
        i = int(np.argmin(cap2))
        candidates.append((float(cap2[i]), _names(t, [q2[i] // c, q2[i] % c])))
    worst = min(candidates, default=None)
    # truthfulness: published counts ≤ original ≤ cap
    untruthful: list[str] = []
    lower1 = np.bincount(k1 % c, weights=n1, minlength=c) \
        + np.bincount(t.dom_code[t.dom_chunk < 0], minlength=c)
    for x in np.flatnonzero(lower1 > single)[:MAX_EVIDENCE]:
        untruthful.append(f"{t.codes[x]}: release shows ≥ {int(lower1[x])} records, "
                          f"original has {int(single[x])}")
    for x in np.flatnonzero(cap1 < single)[:MAX_EVIDENCE]:
        untruthful.append(f"{t.codes[x]}: original has {int(single[x])} records, "
                          f"no reconstruction can hold more than {int(cap1[x])}")
    if len(k2):
        pk, inv = np.unique(k2 % (c * c), return_inverse=True)
        lower2 = np.bincount(inv, weights=n2)
        orig2 = _lookup(q2, s2, pk)
        for i in np.flatnonzero(lower2 > orig2)[:MAX_EVIDENCE]:
            untruthful.append(f"{_names(t, [pk[i] // c, pk[i] % c])}: release shows "
                              f"≥ {int(lower2[i])} records, original has {int(orig2[i])}")
    for i in np.flatnonzero(cap2 < s2)[:MAX_EVIDENCE]:
        untruthful.append(f"{_names(t, [q2[i] // c, q2[i] % c])}: original has {int(s2[i])} "
                          f"records, no reconstruction can hold more than {int(cap2[i])}")
    return Findings(weak[0] if weak else None, weak[1] if weak else None,
                    weak[2] if weak else None, worst[1] if worst else None,
                    int(worst[0]) if worst else None, len(present) + len(q2), untruthful)


def _analyse_general(t: Tables, m: int, map_fn: MapFn | None = None) -> Findings:
    counts = chunk_counts_general(t, m, map_fn)
    weak: tuple[tuple[str, ...], int, str] | None = None
    for g, counter in enumerate(counts):
        for s, n in counter.items():
            if weak is None or (n, _names(t, s)) < (weak[1], weak[0]):
                weak = (_names(t, s), n, t.chunk_label[g])
    original = original_counts_general(t, m, map_fn)
    caps = caps_general(t, counts, original)
    worst = min(((v, _names(t, s)) for s, v in caps.items()), default=None)
    untruthful: list[str] = []
    lower: Counter[Itemset] = Counter()
    for counter in counts:
        lower.update(counter)
    for code in t.dom_code[t.dom_chunk < 0].tolist():
        lower[(code,)] += 1
    for s, n in sorted(lower.items()):
        if n > original.get(s, 0) and len(untruthful) < MAX_EVIDENCE:
            untruthful.append(f"{_names(t, s)}: release shows ≥ {n} records, "
                              f"original has {original.get(s, 0)}")
    for s, n in sorted(original.items()):
        if caps[s] < n and len(untruthful) < 2 * MAX_EVIDENCE:
            untruthful.append(f"{_names(t, s)}: original has {n} records, no reconstruction "
                              f"can hold more than {caps[s]}")
    return Findings(weak[0] if weak else None, weak[1] if weak else None,
                    weak[2] if weak else None, worst[1] if worst else None,
                    int(worst[0]) if worst else None, len(original), untruthful)


def _fmt(itemset: tuple[str, ...] | None) -> str:
    return "{" + ", ".join(itemset or ()) + "}"


def verify_release(files: dict[str, bytes], original: Dataset, k: int, m: int,
                   *, general: bool | None = None, map_fn: MapFn | None = None
                   ) -> VerificationReport:
    """Check a release against the original for the requested k and m (fails closed).

    ``map_fn`` may run the itemset counting of m > 2 partition by partition elsewhere
    (see :mod:`ehr_release.privacy.itemset_counts`); the verdict does not depend on it.
    """
    reqs: list[Requirement] = []
    not_checked = "not checked: the release is not well formed"
    try:
        rel = parse_release(files)
        problems = shape_problems(rel, original.n_patients, k)
        tables = None if problems else build_tables(rel, original)
    except ReleaseRejected as exc:
        reqs.append(Requirement("release format", "release.json in the published shape",
                                str(exc), False))
        for name in ("structure", "chunk k^m-anonymity", "Guarantee 1", "truthfulness"):
            reqs.append(Requirement(name, "see release format", not_checked, False))
        return VerificationReport(NAME, reqs)
    declared = rel.k == k and rel.m == m
    reqs.append(Requirement("release format", f"release.json declaring k = {k}, m = {m}",
                            f"declares k = {rel.k}, m = {rel.m}", declared,
                            {"declared_k": rel.k, "declared_m": rel.m}))
    if tables is not None:
        problems = domain_problems(rel, tables)
    n_sub = sum(len(ch) for c in rel.clusters for ch in c.chunks)
    reqs.append(Requirement(
        "structure", f"clusters of ≥ {k} records partition the {original.n_patients:,} records; "
        "chunk sizes and disjoint chunk domains",
        f"{len(rel.clusters):,} clusters, {len(rel.joints):,} joint clusters, "
        f"{n_sub:,} subrecords" + (f"; {len(problems)} problem(s): {problems[0]}"
                                   if problems else ""),
        not problems, {"problems": problems[:MAX_EVIDENCE]}))
    if problems or tables is None:
        for name in ("chunk k^m-anonymity", "Guarantee 1", "truthfulness"):
            reqs.append(Requirement(name, "see structure", not_checked, False))
        return VerificationReport(NAME, reqs)
    f = analyse_tables(tables, m, general=general, map_fn=map_fn)
    chunk_ok = f.weakest_chunk_support is None or f.weakest_chunk_support >= k
    reqs.append(Requirement(
        "chunk k^m-anonymity", f"every ≤{m}-itemset in a record or shared chunk held by ≥ {k} "
        "subrecords",
        "no chunk itemsets" if f.weakest_chunk is None else
        f"smallest support {f.weakest_chunk_support} ({_fmt(f.weakest_chunk_itemset)} in "
        f"{f.weakest_chunk})", chunk_ok,
        {"itemset": list(f.weakest_chunk_itemset or ()), "support": f.weakest_chunk_support,
         "chunk": f.weakest_chunk}))
    g1_ok = f.weakest_cap is None or f.weakest_cap >= k
    reqs.append(Requirement(
        "Guarantee 1", f"every ≤{m}-itemset of an original record can be held by ≥ {k} "
        "records of a reconstruction",
        f"{f.itemsets_checked:,} itemsets; weakest {_fmt(f.weakest_itemset)} can be held by "
        f"at most {f.weakest_cap} records" if f.weakest_itemset else "no itemsets",
        g1_ok, {"itemset": list(f.weakest_itemset or ()), "support": f.weakest_cap,
                "itemsets": f.itemsets_checked}))
    reqs.append(Requirement(
        "truthfulness", "published counts ≤ original counts ≤ reconstructible maximum",
        "consistent with the original" if not f.untruthful else
        f"{len(f.untruthful)}+ inconsistencies, e.g. {f.untruthful[0]}",
        not f.untruthful, {"inconsistencies": f.untruthful}))
    return VerificationReport(NAME, reqs)
