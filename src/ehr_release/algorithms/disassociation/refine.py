"""Refine: share item-chunk codes across neighbouring clusters (joint clusters).

A code that is rare in each of two clusters (so it sits in both item chunks, counts hidden)
may be common enough in both together: publishing it in a *shared chunk* over the records of
both clusters gives its exact count without breaking k^m-anonymity, because the shared chunk
is itself built by VerPart (so it is k^m-anonymous over the joint records).

**Decisions** (the paper gives no pseudocode): units — clusters, or joint clusters already
made — are walked in HorPart order; the current unit tries to absorb the next one. A join
is kept only if VerPart, run on the members' records projected onto the eligible codes, puts
at least one item-chunk code into a shared chunk. Eligible codes are the shared codes of both
units plus item-chunk codes whose support over all members reaches k, excluding any code in a
member's record chunks (a cluster's chunk domains must stay disjoint). A joint cluster holds
at most ``max_joint_size`` records, so shared chunks stay local and VerPart stays cheap.
Passes repeat until one changes nothing; each cluster belongs to at most one joint cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from ehr_release.algorithms.disassociation.verpart import ConstraintOf, Row, verpart


@dataclass
class ClusterChunks:
    """What VerPart decided for one cluster (mutable: Refine moves item codes out)."""

    rows: list[Row]
    domains: list[list[int]]
    item_support: dict[int, int]


@dataclass
class Unit:
    """A cluster on its own, or a joint cluster with its shared chunk domains.

    ``record_codes`` (codes in a member's record chunks), ``item_codes`` (codes in a member's
    item chunk, not yet shared) and ``shared_codes`` are sets so a join is ruled out cheaply;
    ``fresh`` marks a unit made in the current pass of Refine.
    """

    members: list[int]
    size: int
    record_codes: frozenset[int]
    item_codes: frozenset[int]
    shared: list[list[int]] = field(default_factory=list)
    shared_codes: frozenset[int] = frozenset()
    fresh: bool = False


def _try_join(a: Unit, b: Unit, clusters: Sequence[ClusterChunks], k: int, m: int,
              constraint_of: ConstraintOf, max_joint_size: int) -> Unit | None:
    """The joint unit of ``a`` and ``b`` if it shares at least one more item-chunk code.

    Only a code in an item chunk of one unit and present (item chunk or shared) in the other
    can gain: inside one unit, every item code common enough is already shared.
    """
    if a.size + b.size > max_joint_size:
        return None
    old_a, old_b = a.shared_codes, b.shared_codes
    forbidden = a.record_codes | b.record_codes
    candidates = ((a.item_codes | old_a) & (b.item_codes | old_b)
                  & (a.item_codes | b.item_codes)) - forbidden
    if not candidates:
        return None
    old = old_a | old_b
    if old & forbidden:
        return None
    members = a.members + b.members
    combined: dict[int, int] = dict.fromkeys(candidates, 0)
    for p in members:
        support = clusters[p].item_support
        for t in candidates & support.keys():
            combined[t] += support[t]
    gain = {t for t, s in combined.items() if s >= k or t in old}
    if not gain:
        return None
    eligible = gain | old
    rows = [tuple(t for t in r if t in eligible) for p in members for r in clusters[p].rows]
    domains, _ = verpart(rows, k, m, constraint_of)
    placed = frozenset(t for d in domains for t in d)
    if not placed & gain:
        return None
    return Unit(members, a.size + b.size, forbidden,
                frozenset((a.item_codes | b.item_codes) - placed), domains, placed, True)


def refine(clusters: Sequence[ClusterChunks], k: int, m: int, constraint_of: np.ndarray,
           max_joint_size: int) -> list[Unit]:
    """Form joint clusters; item supports of the members are updated in place.

    Returns every unit in HorPart order (single clusters included, with no shared chunks).
    A later pass only retries neighbours of which one changed: the same two units failed
    to join before and would fail again.
    """
    lookup = constraint_of.tolist()
    units = [Unit([i], len(c.rows), frozenset(chain.from_iterable(c.domains)),
                  frozenset(c.item_support), fresh=True) for i, c in enumerate(clusters)]
    changed = True
    while changed and len(units) > 1:
        changed = False
        merged: list[Unit] = []
        current = units[0]
        for nxt in units[1:]:
            joined = None
            if current.fresh or nxt.fresh:
                joined = _try_join(current, nxt, clusters, k, m, lookup, max_joint_size)
            if joined is None:
                merged.append(current)
                current = nxt
            else:
                current = joined
                changed = True
        merged.append(current)
        for unit in units:
            unit.fresh = False
        for unit in merged:
            unit.fresh = unit.fresh and changed
        units = merged
    for unit in units:
        unit.fresh = False
        if unit.shared_codes:
            for p in unit.members:
                support = clusters[p].item_support
                for t in unit.shared_codes & support.keys():
                    del support[t]
    return units
