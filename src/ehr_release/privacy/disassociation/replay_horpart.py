"""HorPart, replayed from the spec: which records form each cluster, and the clusters' order.

Which records share a cluster is not the releaser's choice. Given the records, the utility
policy, k and maxClusterSize, HorPart (spec ``01-disassociation.md``, "HorPart") is
deterministic under the rules the format documents (field ``group``):

* a partition smaller than maxClusterSize is a leaf; otherwise it splits on one code ``a``:
  the most frequent code of the current constraint not yet split on, else the most frequent
  code of any constraint (whose constraint becomes the current one), else the most frequent
  code; support is counted in the partition, ties go to the code first in string order, and
  a partition with no code left to split on is a leaf;
* records holding ``a`` (D1: ``a`` is ignored below, the constraint kept) come before the
  others (D2: no current constraint); an empty side is no leaf;
* leaves in that depth-first order, each marked D1 or D2, are grouped into clusters of ≥ k
  records: a D1 leaf too small is carried into the next leaf; a D2 leaf too small (carry
  included) joins the previous cluster, or starts the first one; what is left over at the
  end joins the last cluster.

This module is the verifier's own code (it shares nothing with ``ehr_release.algorithms``):
a depth-first walk with an explicit stack over plain Python sets and counts; a chain of
splits down the D2 side keeps its supports by subtraction (see :func:`_chain`).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

NO_CONSTRAINT = -1


Row = tuple[int, ...]


class _Part(NamedTuple):
    """A partition still to split: its records, the codes split on above it (all its
    records hold them), the current constraint and whether it is a D1. (Named tuples: one
    is made per split, and a frozen dataclass's construction was a tenth of the replay.)"""

    records: list[int]
    ignore: tuple[int, ...]
    constraint: int
    d1: bool


class _Leaf(NamedTuple):
    records: list[int]
    d1: bool


def _chain(part: _Part, rows: Sequence[Row], constraint_of: Sequence[int],
           max_cluster_size: int) -> list[_Part | _Leaf]:
    """Split ``part``, then its D2, then that one's D2 …: the D1 parts in order, then the
    last D2 as a leaf (the recursion's depth-first order once each D1 is expanded).

    The supports of the shrinking D2 are kept by subtracting each D1's records, and the
    most frequent code is kept in a heap (an entry goes stale as its support drops; a stale
    top is put back at its current support), so a chain costs its records' codes once, not
    once per split.
    """
    holders: dict[int, list[int]] = {}
    for r in part.records:
        for t in rows[r]:
            holders.setdefault(t, []).append(r)
    for t in part.ignore:
        holders.pop(t, None)
    support = {t: len(v) for t, v in holders.items()}
    # tier 1: in some constraint; the current constraint's codes are looked at first, once
    heap = [(-int(constraint_of[t] != NO_CONSTRAINT), -n, t) for t, n in support.items()]
    heapq.heapify(heap)
    taken: set[int] = set()
    left, current = len(part.records), part.constraint
    out: list[_Part | _Leaf] = []
    while left >= max_cluster_size:
        mine = [] if current == NO_CONSTRAINT else [
            t for t in support if constraint_of[t] == current]
        if mine:
            a = min(mine, key=lambda t: (-support[t], t))
        else:
            while heap:
                tier, n, t = heap[0]
                if t not in support:
                    heapq.heappop(heap)
                elif -n != support[t]:                  # stale: put back at its support
                    heapq.heapreplace(heap, (tier, -support[t], t))
                else:
                    break
            if not heap:
                break
            a = heap[0][2]
        d1 = [r for r in holders[a] if r not in taken]
        taken.update(d1)
        for r in d1:
            for t in rows[r]:
                n = support.get(t)
                if n == 1:
                    del support[t]
                elif n is not None:
                    support[t] = n - 1
        out.append(_Part(d1, (*part.ignore, a), int(constraint_of[a]), True))
        left -= len(d1)
        current = NO_CONSTRAINT
    rest = [r for r in part.records if r not in taken]
    if rest:
        out.append(_Leaf(rest, part.d1 if not out else False))
    return out


#: Chains over at least this many records run on arrays (:class:`_ArrayChains`); smaller
#: ones on Python sets and counts, cheaper for a few hundred records.
ARRAY_MIN = 512
#: A D1 of fewer records has its codes' supports taken off one by one, not by array calls.
SMALL_D1 = 64


class _ArrayChains:
    """:func:`_chain` with arrays, for the long chains near the root: the same walk, the
    supports a vector, the choice one ``argmax`` of (tier, support, earliest code)."""

    def __init__(self, rows: Sequence[Row], constraint_of: Sequence[int],
                 csr: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        if csr is None:
            lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
            csr = (np.r_[0, np.cumsum(lengths)],
                   np.fromiter((t for r in rows for t in r), dtype=np.int64,
                               count=int(lengths.sum())))
        self.indptr, self.codes = csr
        self.rows = rows
        self.constraint_of = np.asarray(constraint_of, dtype=np.int64)
        self.n_codes = len(self.constraint_of)
        self.constrained = (self.constraint_of != NO_CONSTRAINT).astype(np.int64)
        self.latest = self.n_codes - 1 - np.arange(self.n_codes, dtype=np.int64)

    def _pairs(self, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        held = self.indptr[records + 1] - self.indptr[records]
        position = np.repeat(np.arange(len(records), dtype=np.int64), held)
        start = np.repeat(self.indptr[records] - (np.cumsum(held) - held), held)
        return position, self.codes[start + np.arange(len(position), dtype=np.int64)]

    def chain(self, part: _Part, max_cluster_size: int) -> list[_Part | _Leaf]:
        records = np.asarray(part.records, dtype=np.int64)
        position, held = self._pairs(records)
        support = np.bincount(held, minlength=self.n_codes)
        support[list(part.ignore)] = 0      # then negative: every record holds them
        by_code = position[np.argsort(held, kind="stable")]
        starts = np.searchsorted(np.sort(held), np.arange(self.n_codes + 1))
        base = self.constrained * ((len(records) + 1) * self.n_codes) + self.latest
        taken = np.zeros(len(records), dtype=bool)
        left, current = len(records), part.constraint
        out: list[_Part | _Leaf] = []
        while left >= max_cluster_size:
            a = -1
            if current != NO_CONSTRAINT:
                mine = np.flatnonzero((self.constraint_of == current) & (support > 0))
                if len(mine):
                    a = int(mine[np.argmax(support[mine])])
            if a < 0:
                score = np.where(support > 0, base + support * self.n_codes, -1)
                a = int(np.argmax(score))
                if score[a] < 0:
                    break
            d1 = by_code[starts[a]:starts[a + 1]]
            d1 = d1[~taken[d1]]
            taken[d1] = True
            taken_records = records[d1].tolist()
            if len(taken_records) < SMALL_D1:  # a few records: array calls cost more
                for r in taken_records:
                    for t in self.rows[r]:
                        support[t] -= 1
            else:
                support -= np.bincount(self._pairs(records[d1])[1], minlength=self.n_codes)
            out.append(_Part(taken_records, (*part.ignore, a), int(self.constraint_of[a]),
                             True))
            left -= len(d1)
            current = NO_CONSTRAINT
        if left:
            out.append(_Leaf(records[~taken].tolist(), part.d1 if not out else False))
        return out


def _leaves(rows: Sequence[Row], constraint_of: Sequence[int], max_cluster_size: int,
            csr: tuple[np.ndarray, np.ndarray] | None) -> list[_Leaf]:
    """The leaves of the split tree, depth first (D1 before D2), each with its side."""
    out: list[_Leaf] = []
    arrays = _ArrayChains(rows, constraint_of, csr) if len(rows) >= ARRAY_MIN else None
    stack: list[_Part | _Leaf] = [_Part(list(range(len(rows))), (), NO_CONSTRAINT, False)]
    while stack:
        item = stack.pop()
        if isinstance(item, _Leaf):
            out.append(item)
        elif len(item.records) < max_cluster_size:
            out.append(_Leaf(item.records, item.d1))
        elif arrays is not None and len(item.records) >= ARRAY_MIN:
            stack.extend(reversed(arrays.chain(item, max_cluster_size)))
        else:
            stack.extend(reversed(_chain(item, rows, constraint_of, max_cluster_size)))
    return out


def group_leaves(leaves: Sequence[_Leaf], k: int) -> list[list[int]]:
    """Clusters of ≥ k records from the leaves, by the documented carry rule (module doc)."""
    groups: list[list[int]] = []
    carried: list[int] = []
    for leaf in leaves:
        records = carried + leaf.records
        carried = []
        if len(records) >= k or (not leaf.d1 and not groups):
            groups.append(records)
        elif leaf.d1:
            carried = records
        else:
            groups[-1].extend(records)
    if carried:
        if groups:
            groups[-1].extend(carried)
        else:
            groups.append(carried)
    return groups


def clusters(rows: Sequence[Row], constraint_of: Sequence[int], k: int,
             max_cluster_size: int, csr: tuple[np.ndarray, np.ndarray] | None = None
             ) -> list[list[int]]:
    """The clusters (record positions in ``rows``) in HorPart's order.

    ``rows`` holds each record's code ids (ids number the codes in string order, so the
    smallest id is the code first in string order), ``constraint_of`` each code's constraint
    (-1: none); ``csr`` may give the same rows as (indptr, codes) arrays, saving a copy.
    """
    if not rows:
        return []
    return group_leaves(_leaves(rows, constraint_of, max_cluster_size, csr), k)
