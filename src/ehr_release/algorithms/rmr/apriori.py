"""RmR's transaction phase: one cluster's codes made k^m-anonymous by hierarchy cuts.

Poulis et al. 2013 anonymize the transaction part of every cluster with an existing
k^m-anonymity algorithm; we use Apriori Anonymization (AA, Terrovitis, Mamoulis & Kalnis,
"Privacy-preserving anonymization of set-valued data", VLDB 2008), applied per cluster
(local recoding, as the framework does):

* for i = 1 … m, while some i-itemset of generalized codes present in the cluster has
  support < k, take the one with the largest support (ties: smallest node ids — ArtUC's Q
  order) and apply the least-UL *full-subtree* generalization of its items that gives it
  support ≥ k: each item may move to any ancestor, and moving to node g generalizes every
  code of the cluster under g (a cut of the hierarchy). Ties: fewer levels climbed, then the
  smaller node ids;
* generalization only merges items, so supports never fall and a fixed itemset stays fixed
  (AA's monotonicity): pass i never breaks pass i − 1.

A generalized code is published as the set of the cluster's codes under its node (the
release format of ArtUC; Fig. 1c of the ArtUC paper prints RmR's output that way, e.g.
``(493.2, 494.1)`` for section 490–496). Its UL is ArtUC's Def. 5–6 measure, so the two
algorithms are compared on one scale.

Decision (deviation): AA has no suppression. When fewer than k records of a cluster hold any
code, not even the root fixes an item; that item is suppressed (all its codes, counted
against ε like GenDiag's suppressions).
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.gendiag import CodeGeneralization, record_ul
from ehr_release.algorithms.rmr.taxonomy import CodeAncestry


class _Cut:
    """The cluster's codes (local ids) under the current cut: depth of each code's node."""

    def __init__(self, n: int, rec: np.ndarray, local: np.ndarray, anc: np.ndarray,
                 depth: np.ndarray) -> None:
        self.n, self.rec, self.local, self.anc = n, rec, local, anc
        self.level = depth.copy()
        self.alive = np.ones(len(depth), dtype=bool)

    def nodes(self, level: np.ndarray | None = None) -> np.ndarray:
        """Node id of every local code (−1: suppressed)."""
        lv = self.level if level is None else level
        out = self.anc[np.arange(len(lv)), lv]
        return np.where(self.alive, out, -1)

    def pairs(self, node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distinct (record, item) pairs of the cluster under ``node`` (per local code)."""
        item = node[self.local]
        kept = item >= 0
        width = int(node.max()) + 1 if len(node) else 1
        key = np.unique(self.rec[kept] * width + item[kept])
        return key // width, key % width

    def ul(self, node: np.ndarray) -> float:
        """Σ UL(r) over the cluster's records under ``node`` (generalization part)."""
        size = np.bincount(node[node >= 0], minlength=int(node.max()) + 1 if len(node) else 1)
        gen, _ = record_ul(self.n, self.rec, node[self.local], size)
        return float(gen.sum())

    def climbed(self, targets: tuple[int, ...], depths: tuple[int, ...]) -> np.ndarray:
        """Levels after moving each target node's whole subtree up to it."""
        level = self.level.copy()
        for g, d in zip(targets, depths, strict=True):
            under = self.anc[:, d] == g
            level[under] = np.minimum(level[under], d)
        return level


def _violation(cut: _Cut, size: int, k: int) -> tuple[int, ...] | None:
    """The ``size``-itemset with support in [1, k) and the largest support, or None."""
    recs, items = cut.pairs(cut.nodes())
    if size == 1:
        ids, sup = np.unique(items, return_counts=True)
        bad = np.flatnonzero(sup < k)
        if not len(bad):
            return None
        best = bad[np.lexsort((ids[bad], -sup[bad]))[0]]
        return (int(ids[best]),)
    if size == 2:
        ids, col = np.unique(items, return_inverse=True)
        mat = np.zeros((cut.n, len(ids)), dtype=np.float32)  # exact: counts < 2^24
        mat[recs, col.ravel()] = 1.0
        co = np.rint(mat.T @ mat).astype(np.int64)
        a, b = np.nonzero(np.triu((co > 0) & (co < k), 1))
        if not len(a):
            return None
        sup = co[a, b]
        best = np.lexsort((ids[b], ids[a], -sup))[0]
        return int(ids[a[best]]), int(ids[b[best]])
    per_rec: dict[int, list[int]] = {}
    for r, it in zip(recs.tolist(), items.tolist(), strict=True):
        per_rec.setdefault(r, []).append(it)
    counts: Counter[tuple[int, ...]] = Counter()
    for its in per_rec.values():
        counts.update(itertools.combinations(sorted(its), size))
    bad = [(-s, p) for p, s in counts.items() if s < k]
    return min(bad)[1] if bad else None


def _support(cut: _Cut, node: np.ndarray, itemset: set[int]) -> int:
    recs, items = cut.pairs(node)
    hold = np.zeros(cut.n, dtype=np.int64)
    np.add.at(hold, recs[np.isin(items, list(itemset))], 1)
    return int(np.sum(hold == len(itemset)))


def _fix(cut: _Cut, p: tuple[int, ...], k: int) -> bool:
    """Apply the least-UL generalization of ``p``'s items giving it support ≥ k."""
    node = cut.nodes()
    chains, first = [], []
    for item in p:
        i = int(np.flatnonzero(node == item)[0])  # any code standing for this item
        first.append(i)
        chains.append([(int(cut.anc[i, d]), d) for d in range(int(cut.level[i]), -1, -1)])
    best: tuple[float, int, tuple[int, ...], np.ndarray] | None = None
    for combo in itertools.product(*chains):
        if all(c == ch[0] for c, ch in zip(combo, chains, strict=True)):
            continue  # the itemset as it is: already known to fall short
        targets = tuple(g for g, _ in combo)
        level = cut.climbed(targets, tuple(d for _, d in combo))
        moved = cut.nodes(level)
        if _support(cut, moved, {int(moved[i]) for i in first}) < k:
            continue
        climbed = sum(ch[0][1] - d for (_, d), ch in zip(combo, chains, strict=True))
        key = (cut.ul(moved), climbed, targets)
        if best is None or key < best[:3]:
            best = (*key, level)
    if best is None:
        return False
    cut.level = best[3]
    return True


def hierarchy_kkm(table: CodeTable, ancestry: CodeAncestry, rows: np.ndarray, k: int,
                  m: int) -> CodeGeneralization:
    """AA on the records ``rows`` (dataset row indices) of one cluster."""
    rec, code = table.gather(rows)
    uniq, local = np.unique(code, return_inverse=True)
    cut = _Cut(len(rows), rec, local.ravel(), ancestry.anc[uniq], ancestry.depth[uniq])
    for size in range(1, m + 1):
        while (p := _violation(cut, size, k)) is not None:
            if not _fix(cut, p, k):
                node = cut.nodes()
                recs, items = cut.pairs(node)
                sup = {it: int(np.sum(items == it)) for it in p}
                weakest = min(p, key=lambda it: (sup[it], it))
                cut.alive[node == weakest] = False
    node = cut.nodes()
    item = node[cut.local]
    items: dict[int, tuple[int, ...]] = {}
    for label in np.unique(node[node >= 0]).tolist():
        items[int(label)] = tuple(uniq[node == label].tolist())
    size = np.bincount(node[node >= 0], minlength=int(node.max()) + 1 if len(node) else 1)
    gen, sup = record_ul(len(rows), rec, item, size)
    return CodeGeneralization(rows, rec, code, item, items, float(gen.sum()), float(sup.sum()),
                              int(np.sum(~cut.alive)))
