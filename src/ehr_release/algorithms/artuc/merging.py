"""ArtUC phase 3: merge clusters whose codes anonymize with less UL, within the NCP budget δ.

Step 17 merges clusters with identical generalized demographics. Then, repeatedly, the
cluster with the least UL (after GenDiag) is merged with the partner of its own group that
gives the merged cluster the least UL, among partners keeping NCP(D̃) ≤ δ.

Decisions (see the spec): partners come from the same constraint group — merging across
groups would break the utility constraints. What happens when the popped cluster has no
feasible partner is the ``stop`` rule:

* ``"exhaust"`` (default): the cluster is set aside (until its group changes) while the next
  one is tried, so the loop ends exactly when no merge is possible — the paper's "until the
  set of clusters does not change" (Step 22). Kept as default because it is what releases
  have been produced with (their bytes must not change) and because it merges more, which
  lowers UL and suppression: a cluster whose group is saturated says nothing about the
  other groups, which the same-group Decision keeps independent;
* ``"paper"``: merging stops at the first such cluster, the text of Section 4.1 ("If C′UL
  exists, the two clusters are merged … Otherwise, the cluster merging stops").

A set-aside cluster costs only NCP arithmetic: GenDiag runs only for feasible partners.

Which cluster Step 19 takes is the ``order`` rule:

* ``"paper"`` (default): the cluster with the least UL, as Step 19 says — Requirement 2
  (minimum UL) decides alone;
* ``"suppression-first"``, a **deviation from the paper**: clusters whose GenDiag suppresses
  codes are taken before the others (least UL first among each kind) — Requirement 4
  (at most ε codes suppressed) ahead of Requirement 2. Why: with the paper's order, large
  clusters that suppress nothing have the least UL, merge first and spend the NCP budget δ;
  the small clusters that suppress codes come last, when no partner fits δ any more, and
  ε is missed (measured in ``bench/artuc_realistic.py``).

**Algorithm 2** (§4.3, progressive relaxation of Requirements 1 and 4) replaces the owner's
"is this NCP acceptable?" by a rule (:class:`Relax`): merges are first accepted under δ
exactly as above; if, when none is left, the clusters suppress more codes than ε, the owner
accepts NCP up to ``delta_max`` and merging resumes, until suppression is within ε (then a
further NCP increase is "not acceptable" and the clusters are returned: Steps 14, 17–18) or
no merge fits ``delta_max``. So a run that meets δ and ε unaided is not changed at all.

Almost all of ArtUC's time is GenDiag on C ∪ C′ for every feasible partner of a popped
cluster. Those calls are independent, so they are handed over as one batch to the run's
:class:`GenDiagCalls`, which may spread them over threads or processes
(:mod:`ehr_release.runtime.workers`). The search reads only each partner's UL (``calls.uls``, which
need not build the results); the winner's result is then computed in full, once.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ehr_release.algorithms.artuc.formation import Cluster
from ehr_release.algorithms.artuc.gendiag import CodeGeneralization
from ehr_release.algorithms.artuc.space import DemographicSpace

#: GenDiag on several clusters (dataset rows each) → their results, in order.
GenDiagMany = Callable[[Sequence[np.ndarray]], list[CodeGeneralization]]
#: GenDiag on several clusters → each result's UL only, in order (the same floats).
ULMany = Callable[[Sequence[np.ndarray]], list[float]]


@dataclass(frozen=True)
class GenDiagCalls:
    """Where one run's GenDiag calls go: ``results`` gives full results; ``uls`` gives each
    result's UL alone — all the partner search compares, and cheaper to get in bulk."""

    results: GenDiagMany
    uls: ULMany


def merge_identical(clusters: list[Cluster]) -> list[Cluster]:
    """Step 17: one cluster per distinct generalized demographics (first one's position)."""
    by_box: dict[tuple, Cluster] = {}
    for c in clusters:
        key = (c.group, c.box.key())
        if key in by_box:
            kept = by_box[key]
            kept.rows = np.concatenate([kept.rows, c.rows])
        else:
            by_box[key] = Cluster(c.rows.copy(), c.box, c.group)
    return list(by_box.values())


#: What to do when the popped cluster has no feasible partner (see the module docstring).
StopRule = Literal["exhaust", "paper"]
STOP_RULES: tuple[StopRule, ...] = ("exhaust", "paper")
#: Which cluster Step 19 takes first (see the module docstring).
MergeOrder = Literal["paper", "suppression-first"]
MERGE_ORDERS: tuple[MergeOrder, ...] = ("paper", "suppression-first")


def _priority(order: MergeOrder, gen: CodeGeneralization, i: int) -> tuple:
    """Heap key of cluster ``i``: the least key is taken first (Step 19)."""
    if order == "paper":
        return (gen.ul, i)
    return (gen.suppressed == 0, gen.ul, i)


@dataclass(frozen=True)
class Relax:
    """Algorithm 2's data owner as a rule: accept NCP up to ``delta_max`` while the clusters
    suppress more than ``epsilon`` codes (Step 14), and only then."""

    epsilon: float
    delta_max: float


@dataclass(frozen=True)
class Merged:
    """Final clusters with their GenDiag results; ``beyond_delta`` counts the merges that
    Algorithm 2 accepted above δ (0 without :class:`Relax`)."""

    clusters: list[Cluster]
    codes: list[CodeGeneralization]
    beyond_delta: int = 0

    @property
    def suppressed(self) -> int:
        return sum(g.suppressed for g in self.codes)


def merge_by_ul(space: DemographicSpace, clusters: list[Cluster], delta: float,
                calls: GenDiagCalls, *, stop: StopRule = "exhaust",
                order: MergeOrder = "paper", relax: Relax | None = None) -> Merged:
    """Steps 18–22 (Algorithm 2's Steps 7–21 with ``relax``)."""
    if stop not in STOP_RULES:
        raise ValueError(f"stop must be one of {STOP_RULES}; got {stop!r}")
    if order not in MERGE_ORDERS:
        raise ValueError(f"order must be one of {MERGE_ORDERS}; got {order!r}")
    n = sum(c.size for c in clusters)
    slack = 1e-9 * max(n, 1)
    budget = delta * n + slack
    alive: dict[int, Cluster] = dict(enumerate(clusters))
    result = dict(zip(alive, calls.results([c.rows for c in alive.values()]), strict=True))
    suppressed = sum(g.suppressed for g in result.values())
    ncp = {i: c.size * space.ncp(c.box) for i, c in alive.items()}
    total = sum(ncp.values())
    heap = [_priority(order, result[i], i) for i in alive]
    heapq.heapify(heap)
    aside: dict[int, set[int]] = {}
    members: dict[int, set[int]] = {}  # group → its alive clusters (partners never cross)
    for i, c in alive.items():
        members.setdefault(c.group, set()).add(i)
    next_id = len(clusters)
    relaxing = False
    beyond = 0
    while True:
        while heap:
            i = heapq.heappop(heap)[-1]
            if i not in alive:
                continue
            c = alive[i]
            feasible: list[tuple[int, Cluster]] = []
            partners = sorted(members[c.group] - {i})
            boxes = space.join_many(c.box, [alive[j].box for j in partners])
            for j, box in zip(partners, boxes, strict=True):
                other = alive[j]
                merged_ncp = (c.size + other.size) * space.ncp(box)
                if total - ncp[i] - ncp[j] + merged_ncp <= budget:
                    feasible.append((j, Cluster(np.concatenate([c.rows, other.rows]), box,
                                                c.group)))
            if not feasible:
                if stop == "paper":
                    break
                aside.setdefault(c.group, set()).add(i)
                continue
            uls = calls.uls([merged.rows for _, merged in feasible])
            at = min(range(len(feasible)), key=lambda x: (uls[x], feasible[x][0]))
            j, merged = feasible[at]
            gen = calls.results([merged.rows])[0]
            if gen.ul != uls[at]:  # both are GenDiag on the same rows: never differ
                raise RuntimeError("GenDiag's UL differs between its two paths")
            total += merged.size * space.ncp(merged.box) - ncp.pop(i) - ncp.pop(j)
            suppressed += gen.suppressed - result[i].suppressed - result[j].suppressed
            del alive[i], alive[j]
            members[c.group] -= {i, j}
            members[c.group].add(next_id)
            result.pop(i)
            result.pop(j)
            alive[next_id], result[next_id] = merged, gen
            ncp[next_id] = merged.size * space.ncp(merged.box)
            heapq.heappush(heap, _priority(order, gen, next_id))
            for waiting in aside.pop(c.group, set()) - {i, j}:  # their group changed: retry
                heapq.heappush(heap, _priority(order, result[waiting], waiting))
            next_id += 1
            if relaxing:
                beyond += total > delta * n + slack
                if relax is not None and suppressed <= relax.epsilon:
                    break  # Step 14: a larger NCP is no longer worth it (Steps 17–18)
        if relax is None or relaxing or suppressed <= relax.epsilon:
            break
        relaxing, budget = True, relax.delta_max * n + slack  # Step 14: the owner relaxes δ
        aside.clear()
        heap = [_priority(order, result[i], i) for i in alive]
        heapq.heapify(heap)
    order = sorted(alive)
    return Merged([alive[i] for i in order], [result[i] for i in order], beyond)
