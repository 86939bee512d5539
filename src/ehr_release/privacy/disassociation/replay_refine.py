"""Refine, replayed: which clusters form joint clusters, and their shared chunks in order.

The spec (``01-disassociation.md``, "Refine") leaves the pass order open and decides "a
greedy pass over clusters in HorPart order"; the format documents the rest (field
``joint``), and the verifier replays it:

* units — clusters, or joint clusters already made — are walked in cluster order; the
  current unit tries to absorb the next one, and passes repeat until one joins nothing;
* two units join only if together they hold at most 4 × maxClusterSize records and neither
  one's shared codes sit in a record chunk of the other. Candidate codes are in an item
  chunk of one unit and in an item chunk or shared chunk of the other, and in no record
  chunk of either; a candidate gains if the units' item-chunk supports sum to ≥ k, or if it
  is shared already;
* VerPart (:mod:`.replay_verpart`) runs on the members' records projected onto the gaining
  and already-shared codes; the join holds if it places a gaining code in a shared chunk.
  Its chunks, in pass order, are the joint cluster's shared chunks; the codes it places
  leave the members' item chunks.

A join depends on the two units only, so a later pass retries only the neighbours of which
one was made in the pass before: two unchanged neighbours were tried then and failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ehr_release.privacy.disassociation.replay_verpart import Row, verpart


@dataclass(frozen=True)
class Cluster:
    """What VerPart left in one cluster: its records, record-chunk codes, item supports."""

    rows: Sequence[Row]
    record_codes: frozenset[int]
    item_support: dict[int, int]


@dataclass(frozen=True)
class Unit:
    """A cluster alone (no shared chunks) or a joint cluster, by member positions."""

    members: tuple[int, ...]
    size: int
    record_codes: frozenset[int]
    item_codes: frozenset[int]
    shared: tuple[tuple[int, ...], ...] = ()
    shared_codes: frozenset[int] = frozenset()


def _join(a: Unit, b: Unit, clusters: Sequence[Cluster], k: int, m: int,
          constraint_of: Sequence[int], max_joint_size: int) -> Unit | None:
    if a.size + b.size > max_joint_size or not (a.item_codes or b.item_codes):
        return None
    candidates = ((a.item_codes & (b.item_codes | b.shared_codes))
                  | (b.item_codes & a.shared_codes))
    forbidden = a.record_codes | b.record_codes
    candidates -= forbidden
    shared_before = a.shared_codes | b.shared_codes
    if not candidates or shared_before & forbidden:
        return None
    members = a.members + b.members
    gain = {t for t in candidates
            if t in shared_before
            or sum(clusters[p].item_support.get(t, 0) for p in members) >= k}
    if not gain:
        return None
    keep = gain | shared_before
    rows = [tuple(t for t in row if t in keep) for p in members for row in clusters[p].rows]
    domains, _ = verpart(rows, k, m, constraint_of)
    placed = frozenset(t for d in domains for t in d)
    if not placed & gain:
        return None
    return Unit(members, a.size + b.size, forbidden, (a.item_codes | b.item_codes) - placed,
                tuple(tuple(d) for d in domains), placed)


def refine(clusters: Sequence[Cluster], k: int, m: int, constraint_of: Sequence[int],
           max_joint_size: int) -> list[Unit]:
    """The joint clusters (units with shared chunks), in release order (J1, J2, …)."""
    units = [Unit((p,), len(c.rows), c.record_codes, frozenset(c.item_support))
             for p, c in enumerate(clusters)]
    # units made in the last pass (all, at first), by identity: every unit compared is alive
    # in ``units`` or ``walked``, so no id is reused while it is looked up
    new = {id(u) for u in units}
    while new and len(units) > 1:
        made: set[int] = set()
        walked: list[Unit] = []
        current = units[0]
        for following in units[1:]:
            both = None
            if id(current) in new or id(following) in new or id(current) in made:
                both = _join(current, following, clusters, k, m, constraint_of,
                             max_joint_size)
            if both is None:
                walked.append(current)
                current = following
            else:
                current = both
                made.add(id(both))
        walked.append(current)
        units, new = walked, made
    return [u for u in units if u.shared]
