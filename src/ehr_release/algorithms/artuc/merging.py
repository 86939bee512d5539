"""ArtUC phase 3: merge clusters whose codes anonymize with less UL, within the NCP budget δ.

Step 17 merges clusters with identical generalized demographics. Then, repeatedly, the
cluster with the least UL (after GenDiag) is merged with the partner of its own group that
gives the merged cluster the least UL, among partners keeping NCP(D̃) ≤ δ.

Decisions (see the spec): partners come from the same constraint group — merging across
groups would break the utility constraints; and a cluster without a feasible partner is set
aside (until its group changes) while the next one is tried, so the loop ends exactly when
no merge is possible — the paper's "until the set of clusters does not change". A set-aside
cluster costs only NCP arithmetic: GenDiag runs only for feasible partners.

Almost all of ArtUC's time is GenDiag on C ∪ C′ for every feasible partner of a popped
cluster. Those calls are independent, so they are handed over as one batch to
``gendiag_many``, which may run them on several processes (:mod:`ehr_release.workers`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import numpy as np

from ehr_release.algorithms.artuc.formation import Cluster
from ehr_release.algorithms.artuc.gendiag import CodeGeneralization
from ehr_release.algorithms.artuc.space import DemographicSpace

#: GenDiag on several clusters (dataset rows each) → their results, in order.
GenDiagMany = Callable[[Sequence[np.ndarray]], list[CodeGeneralization]]


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


def merge_by_ul(space: DemographicSpace, clusters: list[Cluster], delta: float,
                gendiag_many: GenDiagMany) -> tuple[list[Cluster], list[CodeGeneralization]]:
    """Steps 18–22; returns the final clusters with their GenDiag results."""
    n = sum(c.size for c in clusters)
    budget = delta * n + 1e-9 * max(n, 1)
    alive: dict[int, Cluster] = dict(enumerate(clusters))
    result = dict(zip(alive, gendiag_many([c.rows for c in alive.values()]), strict=True))
    ncp = {i: c.size * space.ncp(c.box) for i, c in alive.items()}
    total = sum(ncp.values())
    heap = [(result[i].ul, i) for i in alive]
    heapq.heapify(heap)
    aside: dict[int, set[int]] = {}
    members: dict[int, set[int]] = {}  # group → its alive clusters (partners never cross)
    for i, c in alive.items():
        members.setdefault(c.group, set()).add(i)
    next_id = len(clusters)
    while heap:
        _, i = heapq.heappop(heap)
        if i not in alive:
            continue
        c = alive[i]
        feasible: list[tuple[int, Cluster]] = []
        for j in sorted(members[c.group] - {i}):
            other = alive[j]
            box = space.join(c.box, other.box)
            merged_ncp = (c.size + other.size) * space.ncp(box)
            if total - ncp[i] - ncp[j] + merged_ncp <= budget:
                feasible.append((j, Cluster(np.concatenate([c.rows, other.rows]), box, c.group)))
        if not feasible:
            aside.setdefault(c.group, set()).add(i)
            continue
        gens = gendiag_many([merged.rows for _, merged in feasible])
        at = min(range(len(feasible)), key=lambda x: (gens[x].ul, feasible[x][0]))
        (j, merged), gen = feasible[at], gens[at]
        total += merged.size * space.ncp(merged.box) - ncp.pop(i) - ncp.pop(j)
        del alive[i], alive[j]
        members[c.group] -= {i, j}
        members[c.group].add(next_id)
        result.pop(i)
        result.pop(j)
        alive[next_id], result[next_id] = merged, gen
        ncp[next_id] = merged.size * space.ncp(merged.box)
        heapq.heappush(heap, (gen.ul, next_id))
        for waiting in aside.pop(c.group, set()) - {i, j}:  # their group changed: retry
            heapq.heappush(heap, (result[waiting].ul, waiting))
        next_id += 1
    order = sorted(alive)
    return [alive[i] for i in order], [result[i] for i in order]
