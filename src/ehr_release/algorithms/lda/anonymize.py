"""From (code, age) trajectories to published representatives: the pure LDA pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ehr_release.algorithms.lda.cluster import cluster_trajectories
from ehr_release.algorithms.lda.loss import dataset_loss
from ehr_release.algorithms.lda.model import LossModel, Traj
from ehr_release.algorithms.lda.trees import AgeTree, CodeTree
from ehr_release.model.hierarchy import Hierarchy

#: A published pair: (ICD node name, (first age, last age) of the age block).
PublishedPair = tuple[str, tuple[int, int]]


@dataclass(frozen=True)
class LdaResult:
    """Cluster and published trajectory of each record, and the release's loss."""

    cluster_of: list[int]
    published: list[list[PublishedPair]]
    ilm: float
    alm: float
    stats: dict[str, int] = field(default_factory=dict)


def make_model(hierarchy: Hierarchy, codes: Sequence[str], *, w_icd: float = 0.5,
               w_age: float = 0.5, leaf_count: int = 0, ages: AgeTree | None = None
               ) -> LossModel:
    """Loss model over ``hierarchy`` with an LCA table for ``codes`` (the data's codes)."""
    tree = CodeTree.from_hierarchy(hierarchy)
    tree = tree.with_lca_table(tree.encode(sorted(set(codes))))
    return LossModel(tree, ages or AgeTree(), w_icd, w_age, leaf_count)


def encode(model: LossModel, trajectories: Sequence[Sequence[tuple[str, int]]]) -> list[Traj]:
    """Trajectories as node ids; raises InputError for unknown codes or ages off the tree."""
    out = []
    for t in trajectories:
        out.append((model.icd.encode([c for c, _ in t]),
                    model.age.encode(np.array([a for _, a in t], dtype=np.int64))))
    return out


def decode(model: LossModel, traj: Traj) -> list[PublishedPair]:
    return [(model.icd.names[i], model.age.interval(int(a)))
            for i, a in zip(traj[0].tolist(), traj[1].tolist(), strict=True)]


def anonymize_trajectories(trajectories: Sequence[Sequence[tuple[str, int]]], k: int,
                           model: LossModel, method: str = "ags") -> LdaResult:
    """k-anonymize trajectories (each ordered by age) by clustering and alignment.

    Parameters
    ----------
    trajectories
        Per record, its (ICD code, age) pairs ordered by age.
    k
        Every published trajectory is shared by at least k records.
    model
        Hierarchies, weights and leaf convention (see :func:`make_model`).
    method
        ``"ags"`` (LDA) or ``"baseline"``.

    Returns
    -------
    LdaResult

    Raises
    ------
    ParameterError
        k < 2 or more than the number of records.
    InputError
        A code outside the ICD hierarchy or an age outside the age hierarchy.
    """
    trajs = encode(model, trajectories)
    clustering = cluster_trajectories(trajs, k, model, method)
    published_nodes = [clustering.representatives[c] for c in clustering.cluster_of.tolist()]
    ilm, alm, _ = dataset_loss(model, trajs, published_nodes)
    names = [decode(model, rep) for rep in clustering.representatives]
    return LdaResult(clustering.cluster_of.tolist(),
                     [names[c] for c in clustering.cluster_of.tolist()], ilm, alm,
                     clustering.stats)
