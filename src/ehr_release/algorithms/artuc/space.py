"""Demographics as arrays: generalization by Def. 2 and NCP, vectorized over candidates.

Cluster formation asks, thousands of times, "which remaining record generalizes with this
cluster at the least NCP?". Answering it record by record in Python would be quadratic, so
each attribute is encoded once — numerical values as floats, categorical values as indices
of their hierarchy nodes — and the join (range union, closest common ancestor) and NCP are
computed for all candidates at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ehr_release.configuration.constraints import (
    CategoricalAttribute,
    Element,
    Interval,
    NumericalAttribute,
    RTConfig,
    RTData,
)
from ehr_release.model.hierarchy import Hierarchy


@dataclass(frozen=True)
class Box:
    """Generalized demographics of a cluster: ranges (numerical) and nodes (categorical)."""

    low: np.ndarray
    high: np.ndarray
    nodes: np.ndarray

    def key(self) -> tuple[tuple[float, ...], tuple[float, ...], tuple[int, ...]]:
        return (tuple(self.low.tolist()), tuple(self.high.tolist()), tuple(self.nodes.tolist()))


class CategoricalAxis:
    """The nodes of one hierarchy that matter for the data, with vectorized joins.

    ``anc[i, l]`` is the ancestor at level ``l`` of node ``i`` (−1 below its depth), so the
    closest common ancestor of two nodes is read off the longest common prefix of their rows.
    """

    def __init__(self, hierarchy: Hierarchy, values: list[str]) -> None:
        nodes: dict[str, None] = {}
        for v in values:
            nodes[v] = None
            for up in hierarchy.ancestors(v):
                nodes[up] = None
        self.hierarchy = hierarchy
        self.names = sorted(nodes, key=lambda n: (hierarchy.level[n], n))
        self.index = {n: i for i, n in enumerate(self.names)}
        depth = max(hierarchy.level[n] for n in self.names)
        self.anc = np.full((len(self.names), depth + 1), -1, dtype=np.int64)
        for n, i in self.index.items():
            for up in (n, *hierarchy.ancestors(n)):
                self.anc[i, hierarchy.level[up]] = self.index[up]
        total = len(hierarchy.leaves_under(hierarchy.root))
        self.ncp = np.array([0.0 if hierarchy.is_leaf(n)
                             else len(hierarchy.leaves_under(n)) / total for n in self.names])

    def join(self, node: int, others: np.ndarray) -> np.ndarray:
        """Closest common ancestor of ``node`` with each of ``others``."""
        row = self.anc[node]
        common = (self.anc[others] == row) & (row >= 0)
        level = np.cumprod(common, axis=1).sum(axis=1) - 1
        return self.anc[others, level]

    def join_all(self, nodes: np.ndarray) -> int:
        """Closest common ancestor of a set of nodes."""
        uniq = np.unique(nodes)
        rows = self.anc[uniq]
        common = np.all(rows == rows[0], axis=0) & (rows[0] >= 0)
        level = int(np.cumprod(common).sum()) - 1
        return int(rows[0, level])

    def covers(self, node: int, others: np.ndarray) -> np.ndarray:
        """Whether ``node`` is an ancestor-or-self of each of ``others``."""
        level = self.hierarchy.level[self.names[node]]
        return self.anc[others, level] == node


class DemographicSpace:
    """Records' demographics encoded per attribute, with weights and domains for NCP."""

    def __init__(self, config: RTConfig, data: RTData) -> None:
        self.attributes = config.attributes
        self.numerical = [i for i, a in enumerate(config.attributes)
                          if isinstance(a, NumericalAttribute)]
        self.categorical = [i for i, a in enumerate(config.attributes)
                            if isinstance(a, CategoricalAttribute)]
        num = [config.attributes[i] for i in self.numerical]
        self.span = np.array([a.span for a in num], dtype=float)
        self.w_num = np.array([a.weight for a in num], dtype=float)
        self.w_cat = np.array([config.attributes[i].weight for i in self.categorical], float)
        n = len(data.patient_ids)
        self.num = np.empty((n, len(num)), dtype=float)
        for j, a in enumerate(num):
            self.num[:, j] = data.demographics[a.name].to_numpy(dtype=float)
        self.axes: list[CategoricalAxis] = []
        self.cat = np.empty((n, len(self.categorical)), dtype=np.int64)
        for j, i in enumerate(self.categorical):
            attr = config.attributes[i]
            assert isinstance(attr, CategoricalAttribute)
            values = data.demographics[attr.name].tolist()
            named = {str(u.demographics[i]) for u in config.constraints}
            axis = CategoricalAxis(attr.hierarchy, sorted(set(values) | named))
            self.axes.append(axis)
            self.cat[:, j] = [axis.index[v] for v in values]

    # ------------------------------------------------------------------ boxes
    def record_box(self, row: int) -> Box:
        return Box(self.num[row].copy(), self.num[row].copy(), self.cat[row].copy())

    def box_of(self, rows: np.ndarray) -> Box:
        """Def. 2 for a cluster: ranges of min..max, closest common ancestors."""
        nodes = np.array([ax.join_all(self.cat[rows, j]) for j, ax in enumerate(self.axes)],
                         dtype=np.int64)
        return Box(self.num[rows].min(axis=0), self.num[rows].max(axis=0), nodes)

    def join(self, a: Box, b: Box) -> Box:
        nodes = np.array([ax.join(int(a.nodes[j]), b.nodes[j:j + 1])[0]
                          for j, ax in enumerate(self.axes)], dtype=np.int64)
        return Box(np.minimum(a.low, b.low), np.maximum(a.high, b.high), nodes)

    def join_many(self, a: Box, others: list[Box]) -> list[Box]:
        """``[self.join(a, b) for b in others]`` with each axis' closest common ancestors
        found for all of ``others`` at once (ArtUC's merge step joins a cluster with every
        cluster of its group, thousands of times)."""
        if not others:
            return []
        nodes = np.array([b.nodes for b in others], dtype=np.int64).reshape(len(others),
                                                                            len(self.axes))
        joined = np.empty_like(nodes)
        for j, ax in enumerate(self.axes):
            joined[:, j] = ax.join(int(a.nodes[j]), nodes[:, j])
        return [Box(np.minimum(a.low, b.low), np.maximum(a.high, b.high), joined[i].copy())
                for i, b in enumerate(others)]

    def ncp(self, box: Box) -> float:
        """NCP of one record generalized to ``box`` (Def. 3–4, weighted)."""
        value = float(np.dot(self.w_num, (box.high - box.low) / self.span)) if len(
            self.span) else 0.0
        for j, ax in enumerate(self.axes):
            value += self.w_cat[j] * ax.ncp[box.nodes[j]]
        return value

    def element_box(self, part: tuple[Element, ...]) -> Box:
        """A constraint's demographic part as a box (Baseline publishes it as is)."""
        low = np.array([_interval(part[i]).low for i in self.numerical], dtype=float)
        high = np.array([_interval(part[i]).high for i in self.numerical], dtype=float)
        nodes = np.array([ax.index[str(part[i])] for ax, i in zip(self.axes, self.categorical,
                                                                 strict=True)], dtype=np.int64)
        return Box(low, high, nodes)

    # ------------------------------------------------------------------ candidates
    def candidate_ncp(self, box: Box, num: np.ndarray, cat: np.ndarray) -> np.ndarray:
        """NCP of ``box`` joined with each candidate (rows of ``num``/``cat``)."""
        cost = np.zeros(len(num))
        if len(self.span):
            low = np.minimum(num, box.low)
            high = np.maximum(num, box.high)
            cost += ((high - low) / self.span) @ self.w_num
        for j, ax in enumerate(self.axes):
            cost += self.w_cat[j] * ax.ncp[ax.join(int(box.nodes[j]), cat[:, j])]
        return cost

    def describe(self, box: Box) -> dict[str, list[float] | str]:
        """The box as release values: ``[low, high]`` per numerical, node name otherwise."""
        out: dict[str, list[float] | str] = {}
        for j, i in enumerate(self.numerical):
            out[self.attributes[i].name] = [box.low[j], box.high[j]]
        for j, i in enumerate(self.categorical):
            out[self.attributes[i].name] = self.axes[j].names[int(box.nodes[j])]
        return {a.name: out[a.name] for a in self.attributes}


def _interval(element: Element) -> Interval:
    assert isinstance(element, Interval)
    return element
