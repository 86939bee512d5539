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
from dataclasses import dataclass

NO_CONSTRAINT = -1


Row = tuple[int, ...]


@dataclass(frozen=True)
class _Part:
    """A partition still to split: its records, the codes split on above it (all its
    records hold them), the current constraint and whether it is a D1."""

    records: list[int]
    ignore: tuple[int, ...]
    constraint: int
    d1: bool


@dataclass(frozen=True)
class _Leaf:
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


def _leaves(rows: Sequence[Row], constraint_of: Sequence[int], max_cluster_size: int
            ) -> list[_Leaf]:
    """The leaves of the split tree, depth first (D1 before D2), each with its side."""
    out: list[_Leaf] = []
    stack: list[_Part | _Leaf] = [_Part(list(range(len(rows))), (), NO_CONSTRAINT, False)]
    while stack:
        item = stack.pop()
        if isinstance(item, _Leaf):
            out.append(item)
        elif len(item.records) < max_cluster_size:
            out.append(_Leaf(item.records, item.d1))
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
             max_cluster_size: int) -> list[list[int]]:
    """The clusters (record positions in ``rows``) in HorPart's order.

    ``rows`` holds each record's code ids (ids number the codes in string order, so the
    smallest id is the code first in string order), ``constraint_of`` each code's constraint
    (-1: none).
    """
    if not rows:
        return []
    return group_leaves(_leaves(rows, constraint_of, max_cluster_size), k)
