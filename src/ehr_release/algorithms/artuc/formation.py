"""ArtUC phase 2: split each constraint group into k-record clusters of least NCP.

Records with identical demographics are interchangeable for NCP, so a group is held as its
distinct demographic tuples (in lexicographic order) with queues of records (dataset order).
Each step scores every tuple at once; ties go to the lowest tuple, then the earliest record.
When the best tuple already lies inside the cluster's box the box cannot change, so the next
picks would be the same tuple again: those records are taken in one go.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ehr_release.algorithms.artuc.space import Box, DemographicSpace


@dataclass
class Cluster:
    """Records (dataset rows) of one cluster, its generalized demographics and group."""

    rows: np.ndarray
    box: Box
    group: int

    @property
    def size(self) -> int:
        return len(self.rows)


@dataclass
class Formation:
    """Phase-2 result: clusters, rows of groups with fewer than k records, random picks."""

    clusters: list[Cluster]
    suppressed_rows: np.ndarray
    picks: list[int] = field(default_factory=list)


def form_clusters(space: DemographicSpace, groups: np.ndarray, k: int,
                  rng: np.random.Generator) -> Formation:
    """Steps 1–14: groups (``groups[row]`` = group id) → clusters of ≥ k records each."""
    clusters: list[Cluster] = []
    dropped: list[np.ndarray] = []
    picks: list[int] = []
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        if len(rows) < k:  # Step 2: generalization alone cannot protect this group
            dropped.append(rows)
            continue
        formed, leftover = _split_group(space, rows, int(g), k, rng, picks)
        _place_leftovers(space, formed, leftover)
        clusters.extend(formed)
    out = np.concatenate(dropped) if dropped else np.empty(0, dtype=np.int64)
    return Formation(clusters, np.sort(out), picks)


def _split_group(space: DemographicSpace, rows: np.ndarray, group: int, k: int,
                 rng: np.random.Generator, picks: list[int]) -> tuple[list[Cluster], list[int]]:
    enc = np.concatenate([space.num[rows], space.cat[rows].astype(float)], axis=1)
    uniq, inverse = np.unique(enc, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    order = np.lexsort((rows, inverse))
    queue = rows[order]
    head = np.searchsorted(inverse[order], np.arange(len(uniq)))
    counts = np.diff(np.r_[head, len(rows)])
    t_num = space.num[queue[head]]
    t_cat = space.cat[queue[head]]
    remaining = len(rows)
    out: list[Cluster] = []

    def take(t: int, n: int) -> list[int]:
        nonlocal remaining
        got = queue[head[t]:head[t] + n].tolist()
        head[t] += n
        counts[t] -= n
        remaining -= n
        return got

    while remaining >= k:
        t = int(np.searchsorted(np.cumsum(counts), int(rng.integers(remaining)), side="right"))
        members = take(t, 1)
        picks.append(members[0])
        box = space.record_box(members[0])
        while len(members) < k:
            cost = space.candidate_ncp(box, t_num, t_cat)
            cost[counts == 0] = np.inf
            t = int(np.argmin(cost))
            joined = _join_tuple(space, box, t_num[t], t_cat[t])
            same = joined.key() == box.key()
            members.extend(take(t, min(int(counts[t]), k - len(members)) if same else 1))
            box = joined
        out.append(Cluster(np.array(members, dtype=np.int64), box, group))
    leftover = [r for t in range(len(uniq)) for r in queue[head[t]:head[t] + counts[t]]]
    return out, [int(r) for r in leftover]


def _join_tuple(space: DemographicSpace, box: Box, num: np.ndarray, cat: np.ndarray) -> Box:
    nodes = np.array([ax.join(int(box.nodes[j]), cat[j:j + 1])[0]
                      for j, ax in enumerate(space.axes)], dtype=np.int64)
    return Box(np.minimum(box.low, num), np.maximum(box.high, num), nodes)


def _place_leftovers(space: DemographicSpace, clusters: list[Cluster], rows: list[int]) -> None:
    """Steps 11–14: each leftover joins the group's cluster whose NCP grows least."""
    for row in rows:
        best, best_gain = 0, np.inf
        for i, c in enumerate(clusters):
            joined = _join_tuple(space, c.box, space.num[row], space.cat[row])
            gain = (c.size + 1) * space.ncp(joined) - c.size * space.ncp(c.box)
            if gain < best_gain - 1e-12:
                best, best_gain = i, gain
        target = clusters[best]
        target.box = _join_tuple(space, target.box, space.num[row], space.cat[row])
        target.rows = np.append(target.rows, row)
