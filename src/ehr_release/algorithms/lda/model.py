"""The loss model shared by alignment, clustering and the loss of a release.

LM(a → b) = (L(b) − L(a)) / |A| (thesis Def. 4), L(node) = leaves under the node. The spec's
decision: a leaf counts ``leaf_count`` leaves — 0 reproduces the thesis' worked examples
(default), 1 is Def. 4 read literally. Costs are kept as integer numerators per attribute
(ΔL summed) so that sums are exact and every comparison sees the same float:
objective = w_ICD · ΔL_ICD / |ICD| + w_Age · ΔL_Age / |Age|.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ehr_release.algorithms.lda.trees import AgeTree, CodeTree
from ehr_release.core.errors import ParameterError

#: A trajectory as node ids: (ICD nodes, age nodes), both int64 arrays of equal length.
Traj = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True, eq=False)
class LossModel:
    """Hierarchies, attribute weights and the leaf convention of one LDA run."""

    icd: CodeTree
    age: AgeTree
    w_icd: float = 0.5
    w_age: float = 0.5
    leaf_count: int = 0

    def __post_init__(self) -> None:
        for name, w in (("w_icd", self.w_icd), ("w_age", self.w_age)):
            if not 0 <= w <= 1:
                raise ParameterError(name, "must be between 0 and 1", w)
        if abs(self.w_icd + self.w_age - 1) > 1e-9:
            raise ParameterError("w_age", "must equal 1 − w_icd (weights sum to 1)", self.w_age)
        if self.leaf_count not in (0, 1):
            raise ParameterError("leaf_count", "must be 0 or 1", self.leaf_count)

    @cached_property
    def alpha(self) -> float:
        return self.w_icd / self.icd.size

    @cached_property
    def beta(self) -> float:
        return self.w_age / self.age.size

    @cached_property
    def icd_lc(self) -> np.ndarray:
        return self.icd.loss_count(self.leaf_count)

    def age_lc(self, node: np.ndarray) -> np.ndarray:
        return self.age.loss_count(node, self.leaf_count)

    def objective(self, d_icd: np.ndarray | int, d_age: np.ndarray | int) -> np.ndarray | float:
        """Weighted loss of integer numerators (the DP's and the clustering's distance)."""
        return self.alpha * d_icd + self.beta * d_age

    # ------------------------------------------------------------------ pair costs
    def suppression(self, icd: np.ndarray, age: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Numerators of LM(value → root) per attribute."""
        return (self.icd_lc[self.icd.root] - self.icd_lc[icd],
                self.age_lc(np.asarray(self.age.root)) - self.age_lc(age))

    def generalization(self, x_icd: np.ndarray, x_age: np.ndarray, y_icd: np.ndarray,
                       y_age: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                   np.ndarray]:
        """LCA of two pairs (broadcasting) and the numerators of LM(x + y → LCA)."""
        li = self.icd.lca(x_icd, y_icd)
        la = self.age.lca(x_age, y_age)
        lci, lca_ = self.icd_lc[li], self.age_lc(la)
        d_i = (lci - self.icd_lc[x_icd]) + (lci - self.icd_lc[y_icd])
        d_a = (lca_ - self.age_lc(x_age)) + (lca_ - self.age_lc(y_age))
        return li, la, d_i, d_a
