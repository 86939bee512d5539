"""RmR's merging phase (Rmerge_R): merge clusters by demographic closeness within δ.

Poulis et al. 2013 merge the k-anonymous clusters of the relational phase, before the
transaction phase, because bigger clusters need less code generalization; the relational
information loss (NCP) of the whole dataset must stay ≤ δ. Of their merging heuristics, the
one the ArtUC paper calls RmR chooses the partner by the *relational* loss (hence the
trailing R), blind to codes and to utility constraints:

* the cluster to merge is the one whose codes currently lose most (largest UL per record
  after :func:`~ehr_release.algorithms.rmr.apriori.hierarchy_kkm`; ties: the older cluster);
* its partner is the cluster whose merge raises the dataset's NCP least (ties: the older
  cluster), among all clusters — any two may merge, whatever their demographics mean, which
  is the paper's "RmR merges together clusters that have semantically distant values";
* the merge is made when NCP(D̃) stays ≤ δ; a cluster with no such partner is set aside until
  the next merge (a merged cluster is a new partner), and the loop ends when no cluster is
  left to try.

Decisions: a cluster whose codes lose nothing (UL 0) is never the one chosen (merging cannot
help it); and a merge is not refused when it does not lower UL — the heuristic judges
partners by NCP only, which is what separates it from ArtUC's UL-driven merging.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ehr_release.algorithms.artuc.formation import Cluster
from ehr_release.algorithms.artuc.gendiag import CodeGeneralization
from ehr_release.algorithms.artuc.space import Box, DemographicSpace

#: The transaction phase on one cluster (dataset rows) → its code generalization.
Anonymize = Callable[[np.ndarray], CodeGeneralization]


def _join_ncp(space: DemographicSpace, box: Box, lows: np.ndarray, highs: np.ndarray,
              nodes: np.ndarray) -> np.ndarray:
    """NCP of ``box`` joined with each box given by rows of ``lows``/``highs``/``nodes``."""
    cost = np.zeros(len(lows))
    if len(space.span):
        cost += ((np.maximum(highs, box.high) - np.minimum(lows, box.low)) / space.span) \
            @ space.w_num
    for j, ax in enumerate(space.axes):
        cost += space.w_cat[j] * ax.ncp[ax.join(int(box.nodes[j]), nodes[:, j])]
    return cost


def merge_by_ncp(space: DemographicSpace, clusters: list[Cluster], delta: float,
                 anonymize: Anonymize) -> tuple[list[Cluster], list[CodeGeneralization]]:
    """Rmerge_R; returns the final clusters with their code generalizations, oldest first."""
    n = sum(c.size for c in clusters)
    budget = delta * n + 1e-9 * max(n, 1)
    alive = list(clusters)
    gens = [anonymize(c.rows) for c in alive]
    ncp = [c.size * space.ncp(c.box) for c in alive]
    total = sum(ncp)
    aside: set[int] = set()
    while True:
        order = sorted((i for i in range(len(alive)) if i not in aside and gens[i].ul > 0),
                       key=lambda i: (-gens[i].ul / alive[i].size, i))
        if not order or len(alive) < 2:
            break
        i = order[0]
        c = alive[i]
        shape = (len(alive), len(space.span))
        lows = np.array([o.box.low for o in alive], dtype=float).reshape(shape)
        highs = np.array([o.box.high for o in alive], dtype=float).reshape(shape)
        nodes = np.array([o.box.nodes for o in alive], dtype=np.int64).reshape(
            len(alive), len(space.axes))
        sizes = np.array([o.size for o in alive], dtype=float)
        rise = (c.size + sizes) * _join_ncp(space, c.box, lows, highs, nodes) \
            - ncp[i] - np.array(ncp)
        rise[i] = np.inf
        j = int(np.argmin(rise))
        if total + rise[j] > budget:
            aside.add(i)
            continue
        box = space.join(c.box, alive[j].box)
        merged = Cluster(np.concatenate([c.rows, alive[j].rows]), box, c.group)
        total += float(rise[j])
        keep = [x for x in range(len(alive)) if x not in (i, j)]
        alive = [alive[x] for x in keep] + [merged]
        gens = [gens[x] for x in keep] + [anonymize(merged.rows)]
        ncp = [ncp[x] for x in keep] + [merged.size * space.ncp(box)]
        aside = set()
    return alive, gens
