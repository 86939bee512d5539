"""HorPart: split the records into clusters of similar records (horizontal partitioning).

The paper's recursion (spec, "HorPart") splits a partition on a code ``a`` — records with
``a`` go left (``D1``, ``a`` then ignored there, the utility constraint kept), the rest right
(``D2``, no constraint) — until a part is smaller than ``maxClusterSize``. Codes of the
current constraint are preferred, then codes of any constraint, then any code; within a tier
the most frequent in the partition, ties to the smallest code.

Two equivalent ways of running that recursion keep a million records fast:

* **Peeling** (large partitions). Following the right branch, ``D2`` is "``D`` minus the
  records holding ``a``", then minus those holding the next code, and so on. Keeping the code
  supports of the remaining records and subtracting each peeled ``D1`` costs each record once
  per chain, where re-counting would cost it once per step (chains are hundreds long).
* **Batched splitting** (small partitions). All small partitions of one depth are split
  together with a few numpy operations over their (record, code) pairs. A pair is marked
  *ignored* once its partition split on its code — exactly the recursion's ``ignore`` set,
  since every record below a split on ``a`` holds ``a``.

Both emit the leaves in the recursion's depth-first order (``D1`` before ``D2``), the order
Refine walks; a leaf smaller than k then joins its sibling subtree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ehr_release.algorithms.disassociation.encoding import EncodedRecords

_NONE = -1
#: Partitions at least this large are peeled; smaller ones are split in batches.
PEEL_MIN_SIZE = 256


@dataclass(frozen=True)
class _Job:
    """A partition still to split: its records, ignored codes, constraint, side."""

    records: np.ndarray
    ignore: tuple[int, ...]
    u: int
    left: bool


@dataclass(frozen=True)
class _Leaf:
    records: np.ndarray
    left: bool


def _gather_codes(enc: EncodedRecords, records: np.ndarray) -> np.ndarray:
    """The code ids of ``records`` (concatenated), without a Python loop."""
    start, stop = enc.indptr[records], enc.indptr[records + 1]
    lengths = stop - start
    offsets = np.repeat(start - (np.cumsum(lengths) - lengths), lengths)
    return enc.indices[offsets + np.arange(int(lengths.sum()))]


class _Chooser:
    """Picks the split code from a support vector, by tier, support, then smallest id.

    Ignored codes carry a negative support, so "support > 0" also means "not ignored".
    """

    def __init__(self, constraint_of: np.ndarray) -> None:
        self.constraint_of = constraint_of
        self.in_constraint = (constraint_of != _NONE).astype(np.int64)
        order = np.argsort(constraint_of, kind="stable")
        bounds = np.searchsorted(constraint_of[order], np.arange(constraint_of.max(initial=-1) + 2))
        self.members = {c: order[bounds[c]:bounds[c + 1]] for c in range(len(bounds) - 1)}

    def choose(self, support: np.ndarray, u: int) -> tuple[int, int]:
        """(code, constraint for the D1 child); code -1 when no code is left."""
        if not support.size:
            return _NONE, _NONE
        if u != _NONE:
            codes = self.members.get(u)
            if codes is not None and len(codes):
                local = support[codes]
                best = int(local.argmax())
                if local[best] > 0:
                    return int(codes[best]), u
        constrained = support * self.in_constraint
        a = int(constrained.argmax())
        if constrained[a] > 0:
            return a, int(self.constraint_of[a])
        a = int(support.argmax())
        return (a, _NONE) if support[a] > 0 else (_NONE, _NONE)


#: Peeled groups up to this size update the supports record by record (cheaper than a gather).
_SMALL_PEEL = 16


def _peel(enc: EncodedRecords, job: _Job, chooser: _Chooser, max_cluster_size: int,
          removed: np.ndarray) -> list[_Job | _Leaf]:
    """Follow the right branch of one large partition; return its parts in DFS order."""
    n_codes = enc.n_codes
    indptr, indices = enc.indptr, enc.indices
    codes = _gather_codes(enc, job.records)
    owner = np.repeat(job.records, indptr[job.records + 1] - indptr[job.records])
    support = np.bincount(codes, minlength=n_codes)
    support[list(job.ignore)] = -len(job.records) - 1     # stays negative: never chosen
    order = np.argsort(codes, kind="stable")
    postings_owner = owner[order]
    bounds = np.searchsorted(codes[order], np.arange(n_codes + 1)).tolist()
    parts: list[_Job | _Leaf] = []
    left_count = len(job.records)
    u = job.u
    while left_count >= max_cluster_size:
        a, child_u = chooser.choose(support, u)
        if a == _NONE:
            break
        holders = postings_owner[bounds[a]:bounds[a + 1]]
        d1 = holders[~removed[holders]]
        removed[d1] = True
        if len(d1) <= _SMALL_PEEL:
            for lo, hi in zip(indptr[d1].tolist(), indptr[d1 + 1].tolist(), strict=True):
                support[indices[lo:hi]] -= 1
        else:
            support -= np.bincount(_gather_codes(enc, d1), minlength=n_codes)
        parts.append(_Job(d1, (*job.ignore, a), child_u, True))
        left_count -= len(d1)
        u = _NONE
    rest = job.records[~removed[job.records]]
    removed[job.records] = False
    if len(rest):
        parts.append(_Leaf(rest, job.left if not parts else False))
    return parts


def _split_batch(enc: EncodedRecords, jobs: list[_Job], constraint_of: np.ndarray,
                 max_cluster_size: int) -> list[list[_Leaf]]:
    """Split many small partitions at once; the leaves of each, in DFS order."""
    n_codes = max(enc.n_codes, 1)
    d1: list[int] = [_NONE] * len(jobs)
    d2: list[int] = [_NONE] * len(jobs)
    arec = np.concatenate([j.records for j in jobs])
    apart = np.repeat(np.arange(len(jobs)), [len(j.records) for j in jobs])
    rec_leaf = np.zeros(enc.n_records, dtype=np.int64)
    counts = enc.indptr[arec + 1] - enc.indptr[arec]
    prec = np.repeat(arec, counts)
    pcode = _gather_codes(enc, arec)
    ppart = np.repeat(apart, counts)
    ign_keys = np.array([p * n_codes + a for p, j in enumerate(jobs) for a in j.ignore],
                        dtype=np.int64)
    # an ignored pair can never be counted or chosen again: drop it (chosen ones below too)
    live = ~np.isin(ppart * n_codes + pcode, ign_keys)
    prec, pcode, ppart = prec[live], pcode[live], ppart[live]
    part_node = np.arange(len(jobs), dtype=np.int64)
    part_u = np.array([j.u for j in jobs], dtype=np.int64)
    with_a = np.zeros(enc.n_records, dtype=bool)
    tier_unit = (enc.n_records + 1) * n_codes
    while len(part_node):
        # partitions below the size limit are leaves: settle them before counting anything
        big = np.bincount(apart, minlength=len(part_node)) >= max_cluster_size
        if not big.all():
            done = ~big[apart]
            rec_leaf[arec[done]] = part_node[apart[done]]
            remap = np.cumsum(big) - 1
            arec, apart = arec[~done], remap[apart[~done]]
            keep_pair = big[ppart]
            prec, pcode, ppart = prec[keep_pair], pcode[keep_pair], remap[ppart[keep_pair]]
            part_node, part_u = part_node[big], part_u[big]
            if not len(part_node):
                break
        n_parts = len(part_node)
        key, support = np.unique(ppart * n_codes + pcode, return_counts=True)
        kpart, kcode = key // n_codes, key % n_codes
        con = constraint_of[kcode]
        u = part_u[kpart]
        tier = np.where((u != _NONE) & (con == u), 2, np.where(con != _NONE, 1, 0))
        score = tier * tier_unit + support * n_codes + (n_codes - 1 - kcode)
        starts = np.flatnonzero(np.r_[True, kpart[1:] != kpart[:-1]]) if len(kpart) else kpart
        best = np.full(n_parts, -1, dtype=np.int64)
        if len(starts):
            best[kpart[starts]] = np.maximum.reduceat(score, starts)
        splits = best >= 0
        a = np.where(splits, n_codes - 1 - best % n_codes, _NONE)
        best_tier = np.where(splits, best // tier_unit, 0)
        leaf_rec = ~splits[apart]
        rec_leaf[arec[leaf_rec]] = part_node[apart[leaf_rec]]
        chosen = pcode == a[ppart]
        with_a[prec[chosen]] = True
        arec, apart = arec[~leaf_rec], apart[~leaf_rec]
        child = 2 * apart + ~with_a[arec]
        keep_pair = splits[ppart] & ~chosen
        prec, pcode = prec[keep_pair], pcode[keep_pair]
        pchild = 2 * ppart[keep_pair] + ~with_a[prec]
        with_a[arec] = False
        present, apart = np.unique(child, return_inverse=True)
        remap = np.full(2 * n_parts, _NONE, dtype=np.int64)
        remap[present] = np.arange(len(present))
        ppart = remap[pchild]
        parent = present // 2
        is_left = present % 2 == 0
        new_nodes = np.arange(len(d1), len(d1) + len(present), dtype=np.int64)
        d1.extend([_NONE] * len(present))
        d2.extend([_NONE] * len(present))
        for node, par, left in zip(new_nodes.tolist(), part_node[parent].tolist(),
                                   is_left.tolist(), strict=True):
            (d1 if left else d2)[par] = node
        parent_tier = best_tier[parent]
        inherited = np.where(parent_tier == 2, part_u[parent],
                             np.where(parent_tier == 1, constraint_of[np.maximum(a[parent], 0)],
                                      _NONE))
        part_u = np.where(is_left, inherited, _NONE)
        part_node = new_nodes
    is_leaf = np.array([x == _NONE and y == _NONE for x, y in zip(d1, d2, strict=True)])
    arec_all = np.concatenate([j.records for j in jobs])
    nodes = rec_leaf[arec_all]
    members = np.argsort(nodes, kind="stable")
    bounds = np.searchsorted(nodes[members], np.arange(len(d1) + 1))
    out: list[list[_Leaf]] = []
    for root, job in enumerate(jobs):
        leaves: list[_Leaf] = []
        stack = [(root, job.left)]
        while stack:
            node, left = stack.pop()
            if is_leaf[node]:
                leaves.append(_Leaf(arec_all[members[bounds[node]:bounds[node + 1]]], left))
                continue
            if d2[node] != _NONE:
                stack.append((d2[node], False))
            if d1[node] != _NONE:
                stack.append((d1[node], True))
        out.append(leaves)
    return out


def _merge_small(leaves: list[_Leaf], k: int) -> list[np.ndarray]:
    """Group leaves so every group has ≥ k records.

    A leaf smaller than k joins its sibling subtree: a left (``D1``) leaf is carried into the
    next leaf in depth-first order — the first leaf of its ``D2`` sibling — and a right leaf
    joins the previous group, which ends its ``D1`` sibling's subtree. Either way a group is
    a run of consecutive leaves, so the clusters are cuts of the leaves' records in order.
    """
    sizes: list[int] = []
    pending = 0
    for leaf in leaves:
        total = pending + len(leaf.records)
        pending = 0
        if total >= k or not (leaf.left or sizes):
            sizes.append(total)
        elif leaf.left:
            pending = total
        else:
            sizes[-1] += total
    if pending:
        if sizes:
            sizes[-1] += pending
        else:
            sizes.append(pending)
    records = np.concatenate([leaf.records for leaf in leaves])
    return np.split(records, np.cumsum(sizes)[:-1])


def horpart(enc: EncodedRecords, k: int, constraint_of: np.ndarray,
            max_cluster_size: int) -> list[np.ndarray]:
    """Clusters of record indices, in HorPart order, each of ≥ k records when n ≥ k.

    Parameters
    ----------
    enc
        The records.
    k
        Minimum cluster size.
    constraint_of
        Code id → constraint number, ``-1`` for codes in no constraint.
    max_cluster_size
        A partition smaller than this is not split further (the paper uses 2k).
    """
    if enc.n_records == 0:
        return []
    chooser = _Chooser(constraint_of)
    removed = np.zeros(enc.n_records, dtype=bool)
    # sequence of leaves and small jobs in DFS order; small jobs are expanded afterwards
    sequence: list[_Job | _Leaf] = []
    stack: list[_Job | _Leaf] = [_Job(np.arange(enc.n_records), (), _NONE, False)]
    while stack:
        item = stack.pop()
        if isinstance(item, _Leaf) or len(item.records) < max_cluster_size:
            sequence.append(item if isinstance(item, _Leaf) else _Leaf(item.records, item.left))
        elif len(item.records) < PEEL_MIN_SIZE:
            sequence.append(item)
        else:
            stack.extend(reversed(_peel(enc, item, chooser, max_cluster_size, removed)))
    small = [x for x in sequence if isinstance(x, _Job)]
    expanded = iter(_split_batch(enc, small, constraint_of, max_cluster_size) if small else [])
    leaves: list[_Leaf] = []
    for x in sequence:
        leaves.extend(next(expanded) if isinstance(x, _Job) else [x])
    return _merge_small(leaves, k)
