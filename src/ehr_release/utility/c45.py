"""A C4.5 decision tree (Quinlan 1993, release 8), the classifier of the DiffGen paper.

Mohammed et al. (JAMIA 2013) measure classification accuracy with C4.5; scikit-learn only
has CART (binary splits on numbers, cost-complexity pruning). This module is the learner
the paper names, kept small: no missing values (DiffGen's inputs have none), no rulesets,
no windowing.

Why our own code: the index's C4.5 packages were checked (issue 19). ``chefboost`` has
gain ratio but no error-based pruning and no case weights; ``c4dot5-decision-tree``,
``c45-decision-tree`` and ``c4point5`` are unmaintained student code; ``c50py`` is C5.0
(binary subset groupings of categories, global pruning) rather than C4.5's multiway
splits; ``python-weka-wrapper3`` runs Weka's J48 (the reference reimplementation) but needs
a JVM per process through JPype and bundles GPL Weka.

What it does, following the C4.5 book and the release 8 source:

* **Split selection** by gain ratio, among the attributes whose gain is at least the average
  gain of the attributes that can split the node (book §2.2); a split needs at least two
  branches holding ``min_objs`` (2) cases.
* **Categorical attributes** split multiway, one branch per value seen in training; a value
  with no cases at the node gets a leaf of the node's class.
* **Numerical attributes** split binary, ``x ≤ t`` with ``t`` the largest training value
  below the cut; each side needs ``clip(0.1·N/|classes|, 2, 25)`` cases and the gain is
  charged log2(#candidate cuts)/N (release 8, Quinlan 1996 "Improved use of continuous
  attributes in C4.5").
* **Case weights** count as fractional cases everywhere (a row of weight 3 is three rows).
* **Pruning**: a subtree that does not lower the training error collapses while growing;
  then error-based pruning with confidence factor ``cf`` (0.25): a node's estimated errors
  are ``E + added_errors(N, E, cf)``; a subtree is replaced by a leaf or by its largest
  branch ("subtree raising") when that estimate is no worse (within the 0.1 of the C4.5
  source) than the subtree's (book §4.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

#: C4.5's tolerance for comparing gains (``Epsilon`` of the release 8 source).
EPSILON = 1e-3
#: Normal deviates for upper confidence limits (``Val``/``Dev`` of the release 8 source).
_CF_VAL = (0.0, 0.001, 0.005, 0.01, 0.05, 0.10, 0.20, 0.40, 1.00)
_CF_DEV = (4.0, 3.09, 2.58, 2.33, 1.65, 1.28, 0.84, 0.25, 0.00)


# --------------------------------------------------------------------------- statistics
def _entropy(counts: np.ndarray) -> np.ndarray:
    """Entropy in bits of each row of class counts (0 for an empty row).

    As ``log2 T − Σ c·log2 c / T``, without ``errstate`` (called per node and attribute).
    """
    counts = np.asarray(counts, dtype=float)
    counts = counts.reshape(-1, counts.shape[-1])
    total = counts.sum(axis=1)
    plogp = (counts * np.log2(np.maximum(counts, 1e-300))).sum(axis=1)
    safe = np.maximum(total, 1e-300)
    return np.where(total > 0, np.log2(safe) - plogp / safe, 0.0)


def _deviate(cf: float) -> float:
    """The normal deviate C4.5 uses for confidence factor ``cf`` (table interpolation)."""
    i = 0
    while cf > _CF_VAL[i]:
        i += 1
    if i == 0:
        return _CF_DEV[0]
    lo, hi = _CF_VAL[i - 1], _CF_VAL[i]
    return _CF_DEV[i - 1] + (_CF_DEV[i] - _CF_DEV[i - 1]) * (cf - lo) / (hi - lo)


def added_errors(n: float, e: float, cf: float = 0.25) -> float:
    """Extra errors C4.5 predicts for a leaf of ``n`` cases with ``e`` errors (``AddErrs``).

    ``n · U_cf(e, n) − e``, where ``U_cf`` is the upper limit of the binomial error rate at
    confidence ``cf``: exact for ``e = 0`` (``1 − cf^(1/n)``), linear between 0 and 1 error,
    and the normal approximation with continuity correction above, as in the release 8
    source.
    """
    if n <= 0:
        return 0.0
    if e < 1e-6:
        return n * (1.0 - math.exp(math.log(cf) / n))
    if e < 0.9999:
        v0 = n * (1.0 - math.exp(math.log(cf) / n))
        return v0 + e * (added_errors(n, 1.0, cf) - v0)
    if e + 0.5 >= n:
        return 0.67 * (n - e)
    coeff = _deviate(cf) ** 2
    pr = (e + 0.5 + coeff / 2
          + math.sqrt(coeff * ((e + 0.5) * (1 - (e + 0.5) / n) + coeff / 4))) / (n + coeff)
    return n * pr - e


@dataclass(frozen=True)
class SplitScore:
    """Gain, split information and gain ratio of one attribute at one node (bits)."""

    gain: float
    split_info: float
    threshold: float | None = None  # numerical attributes: x ≤ threshold goes left

    @property
    def gain_ratio(self) -> float:
        return self.gain / self.split_info if self.split_info > EPSILON else 0.0


# --------------------------------------------------------------------------- tree
@dataclass(eq=False)
class Node:
    """A tree node: ``attr`` < 0 for a leaf; ``dist`` is the class weight of its cases."""

    dist: np.ndarray
    cls: int
    attr: int = -1
    threshold: float = math.nan
    children: list[Node] = field(default_factory=list)
    train_errors: float = 0.0  # misclassified training weight of the grown subtree

    @property
    def is_leaf(self) -> bool:
        return self.attr < 0

    @property
    def items(self) -> float:
        return float(self.dist.sum())

    def make_leaf(self) -> None:
        self.attr, self.threshold, self.children = -1, math.nan, []


class C45Classifier:
    """C4.5 with gain ratio, multiway categorical splits and error-based pruning.

    Parameters
    ----------
    cf : float
        Confidence factor of the pruning (C4.5's ``-c``, default 25 %); smaller prunes more.
    min_objs : float
        Minimum cases (total weight) in at least two branches of a split (C4.5's ``-m``).
    subtree_raising : bool
        Let pruning replace a node by its largest branch (C4.5 does by default).
    categorical : list of str, optional
        Columns to split multiway; by default every non-numeric column.

    Examples
    --------
    >>> X = pd.DataFrame({"a": ["x", "x", "y", "y"], "b": [1.0, 2.0, 3.0, 4.0]})
    >>> C45Classifier().fit(X, ["p", "p", "q", "q"]).predict(X).tolist()
    ['p', 'p', 'q', 'q']
    """

    def __init__(self, cf: float = 0.25, min_objs: float = 2.0, subtree_raising: bool = True,
                 categorical: list[str] | None = None) -> None:
        if not 0 < cf < 1:
            raise ValueError(f"cf must be in (0, 1), got {cf!r}")
        self.cf = cf
        self.min_objs = min_objs
        self.subtree_raising = subtree_raising
        self.categorical = categorical

    # ------------------------------------------------------------------ data
    def _columns(self, X: pd.DataFrame, fitting: bool) -> list[np.ndarray]:
        """Categorical columns as codes into the training values (−1: unseen), numbers as
        float; missing values are refused (C4.5's fractional cases are not implemented)."""
        if fitting:
            self.features_ = list(X.columns)
            cats = self.categorical if self.categorical is not None else [
                c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])
                or pd.api.types.is_bool_dtype(X[c])]
            self.is_categorical_ = [c in set(cats) for c in self.features_]
            self.values_: list[list[Any]] = []
        elif list(X.columns) != self.features_:
            raise ValueError("predict needs the columns the tree was fitted on, in order")
        cols = []
        for j, name in enumerate(self.features_):
            col = X[name]
            if col.isna().any():
                raise ValueError(f"column {name!r} has missing values; C4.5 here has no "
                                 "fractional cases, drop or fill them first")
            if self.is_categorical_[j]:
                if fitting:
                    codes, uniques = pd.factorize(col, sort=True)
                    self.values_.append(list(uniques))
                else:
                    codes = pd.Index(self.values_[j]).get_indexer(col)
                cols.append(np.asarray(codes, dtype=np.int64))
            else:
                if fitting:
                    self.values_.append([])
                cols.append(col.to_numpy(dtype=float))
        return cols

    # ------------------------------------------------------------------ fit
    def fit(self, X: pd.DataFrame, y: Any, sample_weight: Any = None) -> C45Classifier:
        """Grow the tree on ``X`` (rows of weight 0 are ignored), then prune it."""
        labels = np.asarray(y)
        self.classes_, yc = np.unique(labels, return_inverse=True)
        w = np.ones(len(labels)) if sample_weight is None else np.asarray(sample_weight,
                                                                          dtype=float)
        if len(w) != len(labels) or len(X) != len(labels):
            raise ValueError("X, y and sample_weight must have the same length")
        if (w < 0).any():
            raise ValueError("sample_weight must be ≥ 0")
        self._start(X, yc, w)
        idx = np.flatnonzero(w > 0)
        try:
            self.root_ = self._grow(idx)
            self._prune(self.root_, idx, update=True)
        finally:
            self._stop()
        return self

    def _start(self, X: pd.DataFrame, yc: np.ndarray, w: np.ndarray) -> None:
        """Training state: columns, classes, weights, and the categorical columns as one
        code matrix with a gather index, so all of them are scored at a node at once."""
        self._x = self._columns(X, fitting=True)
        self._y, self._w = yc.astype(np.int64), w
        k = len(self.classes_)
        self._cat = [j for j, c in enumerate(self.is_categorical_) if c]
        sizes = np.array([len(self.values_[j]) for j in self._cat], dtype=np.int64)
        self._codes = (np.column_stack([self._x[j] for j in self._cat]) if self._cat
                       else np.zeros((len(yc), 0), dtype=np.int64))
        self._offsets = np.concatenate([[0], np.cumsum(sizes * k)[:-1]]).astype(np.int64)
        self._cells = int((sizes * k).sum())
        vmax = int(sizes.max()) if len(sizes) else 0
        # gather[j, v, c] → cell of column j, value v, class c; the pad cell (== _cells) is 0
        v, c = np.arange(vmax)[None, :, None], np.arange(k)[None, None, :]
        self._gather = np.where(v < sizes[:, None, None],
                                self._offsets[:, None, None] + v * k + c, self._cells)

    def _stop(self) -> None:
        for name in ("_x", "_y", "_w", "_cat", "_codes", "_offsets", "_cells", "_gather"):
            delattr(self, name)

    def _dist(self, idx: np.ndarray) -> np.ndarray:
        return np.bincount(self._y[idx], weights=self._w[idx], minlength=len(self.classes_))

    def _categorical_scores(self, idx: np.ndarray, dist: np.ndarray) -> dict[int, SplitScore]:
        """Gain and split info of every categorical attribute at the node of ``idx``, in
        one pass (attributes without two branches of ``min_objs`` cases are left out)."""
        if not self._cat:
            return {}
        k, n = len(self.classes_), float(dist.sum())
        info = float(_entropy(dist)[0])
        table = np.zeros(self._cells + 1)
        step = max(1, 2_000_000 // max(1, len(idx)))  # bounded memory per pass
        for lo in range(0, len(self._cat), step):
            cells = (self._codes[idx, lo:lo + step] * k + self._y[idx, None]
                     + self._offsets[None, lo:lo + step])
            weights = np.broadcast_to(self._w[idx, None], cells.shape)
            table[:self._cells] += np.bincount(cells.ravel(), weights=weights.ravel(),
                                               minlength=self._cells)
        per_value = table[self._gather]  # [attribute, value, class]
        branch = per_value.sum(axis=2)
        viable = (branch >= self.min_objs).sum(axis=1) >= 2
        m, vmax = branch.shape
        cond = (branch * _entropy(per_value.reshape(m * vmax, k)).reshape(m, vmax)).sum(1)
        gain = info - cond / n
        split = _entropy(branch)
        return {self._cat[i]: SplitScore(float(gain[i]), float(split[i]))
                for i in np.flatnonzero(viable)}

    def _numerical_score(self, j: int, idx: np.ndarray, dist: np.ndarray) -> SplitScore | None:
        """Best threshold of numerical attribute ``j`` at the node of ``idx`` by gain, the
        gain charged log2(#candidate cuts)/N; None if no cut leaves enough cases."""
        k, n = len(self.classes_), float(dist.sum())
        info = float(_entropy(dist)[0])
        col, y, w = self._x[j][idx], self._y[idx], self._w[idx]
        order = np.argsort(col, kind="stable")
        vs = col[order]
        onehot = np.zeros((len(idx), k))
        onehot[np.arange(len(idx)), y[order]] = w[order]
        left = np.cumsum(onehot, axis=0)[:-1]
        left_w = left.sum(axis=1)
        right_w = n - left_w
        min_split = min(max(0.10 * n / k, self.min_objs), 25.0)
        ok = (vs[:-1] < vs[1:]) & (left_w >= min_split - 1e-9) & (right_w >= min_split - 1e-9)
        tries = int(ok.sum())
        if tries == 0:
            return None
        cand = np.flatnonzero(ok)
        lw, rw = left_w[cand], right_w[cand]
        cond = (lw * _entropy(left[cand]) + rw * _entropy(dist - left[cand])) / n
        best = int(np.argmax(info - cond))
        gain = info - float(cond[best]) - math.log2(tries) / n
        split = float(_entropy(np.array([lw[best], rw[best]]))[0])
        return SplitScore(gain, split, float(vs[cand[best]]))

    def _scores(self, idx: np.ndarray, dist: np.ndarray) -> dict[int, SplitScore]:
        """Scores of every attribute that can split the node, in column order."""
        scores = self._categorical_scores(idx, dist)
        for j, categorical in enumerate(self.is_categorical_):
            if not categorical and (s := self._numerical_score(j, idx, dist)) is not None:
                scores[j] = s
        return dict(sorted(scores.items()))

    def _choose(self, idx: np.ndarray, dist: np.ndarray) -> tuple[int, SplitScore] | None:
        """Best gain ratio among attributes with at least average gain (C4.5 §2.2)."""
        scores = {j: s for j, s in self._scores(idx, dist).items() if s.gain > -EPSILON}
        if not scores:
            return None
        average = sum(s.gain for s in scores.values()) / len(scores)
        best, best_ratio = None, EPSILON
        for j, s in scores.items():
            if s.gain >= average - EPSILON and s.split_info > EPSILON \
                    and s.gain_ratio > best_ratio:
                best, best_ratio = j, s.gain_ratio
        return None if best is None else (best, scores[best])

    def _route(self, node: Node, idx: np.ndarray) -> list[np.ndarray]:
        col = self._x[node.attr][idx]
        if self.is_categorical_[node.attr]:
            return [idx[col == v] for v in range(len(self.values_[node.attr]))]
        left = col <= node.threshold
        return [idx[left], idx[~left]]

    def _grow(self, idx: np.ndarray, parent_cls: int = 0) -> Node:
        dist = self._dist(idx)
        n = float(dist.sum())
        node_errors = n - float(dist.max()) if n > 0 else 0.0
        node = Node(dist, int(np.argmax(dist)) if n > 0 else parent_cls,
                    train_errors=node_errors)
        if n <= 0 or node_errors <= 1e-9 or n < 2 * self.min_objs:
            return node
        chosen = self._choose(idx, dist)
        if chosen is None:
            return node
        node.attr, score = chosen
        if score.threshold is not None:
            node.threshold = score.threshold
        node.children = [self._grow(part, node.cls) for part in self._route(node, idx)]
        subtree_errors = sum(c.train_errors for c in node.children)
        if subtree_errors >= node_errors - EPSILON:  # no better than a leaf: collapse
            node.make_leaf()
        else:
            node.train_errors = subtree_errors
        return node

    # ------------------------------------------------------------------ prune
    def _prune(self, node: Node, idx: np.ndarray, update: bool) -> float:
        """Estimated errors of ``node`` on the cases ``idx``; with ``update`` the subtree
        is pruned in place (C4.5 ``Prune``), without it only estimated."""
        dist = self._dist(idx)
        cases = float(dist.sum())
        if update:
            node.dist = dist
            if cases > 0:
                node.cls = int(np.argmax(dist))
        leaf_errors = cases - float(dist[node.cls])
        leaf_estimate = leaf_errors + added_errors(cases, leaf_errors, self.cf)
        if node.is_leaf:
            return leaf_estimate
        tree_estimate = sum(self._prune(child, part, update)
                            for child, part in zip(node.children, self._route(node, idx),
                                                   strict=True))
        if not update:
            return tree_estimate
        largest = max(node.children, key=lambda c: c.items)
        branch_estimate = self._prune(largest, idx, update=False) \
            if self.subtree_raising else math.inf
        if leaf_estimate <= branch_estimate + 0.1 and leaf_estimate <= tree_estimate + 0.1:
            node.make_leaf()
            return leaf_estimate
        if branch_estimate <= tree_estimate + 0.1:
            node.attr, node.threshold = largest.attr, largest.threshold
            node.children, node.cls = largest.children, largest.cls
            return self._prune(node, idx, update=True)
        return tree_estimate

    # ------------------------------------------------------------------ predict
    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Class of each row; a categorical value unseen in training takes the class of
        the node that tests it."""
        cols = self._columns(X, fitting=False)
        out = np.empty(len(X), dtype=np.int64)
        stack = [(self.root_, np.arange(len(X)))]
        while stack:
            node, idx = stack.pop()
            if node.is_leaf or len(idx) == 0:
                out[idx] = node.cls
                continue
            col = cols[node.attr][idx]
            if self.is_categorical_[node.attr]:
                known = (col >= 0) & (col < len(node.children))
                out[idx[~known]] = node.cls
                stack += [(child, idx[known & (col == v)])
                          for v, child in enumerate(node.children)]
            else:
                left = col <= node.threshold
                stack += [(node.children[0], idx[left]), (node.children[1], idx[~left])]
        return self.classes_[out]

    # ------------------------------------------------------------------ inspection
    def root_scores(self, X: pd.DataFrame, y: Any,
                    sample_weight: Any = None) -> dict[str, SplitScore]:
        """Gain, split info and gain ratio of every attribute on the whole of ``X`` (the
        numbers C4.5 compares at the root; for worked examples and diagnostics)."""
        labels = np.asarray(y)
        self.classes_, yc = np.unique(labels, return_inverse=True)
        self._start(X, yc, np.ones(len(labels)) if sample_weight is None
                    else np.asarray(sample_weight, dtype=float))
        idx = np.arange(len(labels))
        try:
            return {self.features_[j]: s for j, s in self._scores(idx, self._dist(idx)).items()}
        finally:
            self._stop()

    def leaves(self) -> int:
        """Number of leaves of the fitted tree."""
        count, stack = 0, [self.root_]
        while stack:
            node = stack.pop()
            if node.is_leaf:
                count += 1
            else:
                stack += node.children
        return count

    def describe(self) -> str:
        """The tree as indented text, like C4.5's output (branches in value order)."""
        lines: list[str] = []

        def walk(node: Node, depth: int) -> None:
            for i, child in enumerate(node.children):
                name = self.features_[node.attr]
                test = (f"{name} = {self.values_[node.attr][i]}"
                        if self.is_categorical_[node.attr]
                        else f"{name} {'<=' if i == 0 else '>'} {node.threshold:g}")
                pad = "|   " * depth
                if child.is_leaf:
                    lines.append(f"{pad}{test}: {self.classes_[child.cls]} "
                                 f"({child.items:g})")
                else:
                    lines.append(f"{pad}{test}")
                    walk(child, depth + 1)

        if self.root_.is_leaf:
            return f"{self.classes_[self.root_.cls]} ({self.root_.items:g})"
        walk(self.root_, 0)
        return "\n".join(lines)
