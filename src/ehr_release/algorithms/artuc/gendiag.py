"""GenDiag: make one cluster k^m-anonymous by set-generalizing and suppressing codes.

The adapted CBA of the paper's Appendix A, with the ties it leaves open fixed so runs are
reproducible:

* Q is processed by support (desc), then smaller itemsets first, then item ids;
* the generalization partner minimizes ``UL(u ∪ u')`` (= its size: u and u' lie in one
  code set, and code weights w(ũ) are given per code set, so w is the same for every
  candidate u' and (2^|ũ| − 1)·w orders them by size), then prefers the better-supported
  ``u'``, then the lexicographically smaller codes. Without utility constraints (RmR) all
  codes share one set and weights may differ between candidates; the choice stays by size
  there (the weights still enter every UL GenDiag reports, so merging sees them);
* a merged item keeps the id of the better-supported part (ties: the smaller id);
* suppression removes the least-supported item of p (ties: smaller codes).

Why two Q strategies: the paper materializes every infrequent ≤m-itemset (``FullQueue``),
which for m = 2 means a hundred thousand pairs per large cluster. With the tie rule "smaller
itemsets first", a pair is never selected while one of its items is still infrequent (that
item has at least the pair's support and would be selected first), so for m ≤ 2 it suffices
to track infrequent items and infrequent pairs of *frequent* items (``BorderQueue``). Both
select the same itemset at every step; the tests check they produce identical output.

Speed (the benchmark runs GenDiag thousands of times): ``BorderQueue`` does the work of the
generic fix loop without its per-merge bookkeeping. Q's live entries depend only on the state
and the fix loop never reads Q, so pairs are pushed once per fix (``_flush``); a singleton's
run of merges (``_grow``) and a cross-code-set pair's (``_Lineage``) keep the growing item in
local variables; ``_fix_pair``'s fast path merges inline and holds its grown sides'
partner-heap entries until it ends. Set-up and UL avoid ``np.unique`` (numpy's hash-based
unique is several times slower than a sort on a cluster's few thousand keys) and re-sorting
what :meth:`CodeTable.gather` already returns in order.
The items and queues live in :mod:`.gendiag_items` and :mod:`.gendiag_queues`; this module
holds the entry point, the code generalization it returns and UL.
``tests/test_artuc_gendiag_equivalence.py`` checks the output is identical to a frozen copy
of the step-by-step implementation.

By default the same loop runs compiled (:mod:`.gendiag_kernel`, numba) for m ≤ 2 — with the
set-up and the labelling, and for unweighted code tables with UL too, in one compiled call
(its floats are those of :func:`record_ul`, which weighted tables still use);
``compiled=False`` runs the Python loop, the reference that
``tests/test_artuc_gendiag_compiled.py`` holds the compiled one to, field by field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ehr_release.algorithms.artuc import gendiag_kernel
from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.gendiag_items import _Items
from ehr_release.algorithms.artuc.gendiag_queues import (  # noqa: F401  (re-exported: tests)
    _ID_BITS,
    _INT64_KEYS_BELOW_K,
    BorderQueue,
    FullQueue,
    _Queue,
    initial_q,
)


@dataclass(frozen=True)
class CodeGeneralization:
    """GenDiag's output for one cluster.

    ``rec``/``code``/``item`` list every code occurrence: local record position, code id,
    and the item (generalized code) that now stands for it (−1: suppressed). ``items`` maps
    item id → its sorted code ids. ``ul`` is Σ UL(r) over the cluster, split into the
    generalization part and the suppression part (Σ s(r)); ``suppressed`` counts the codes
    of suppressed items (the quantity bounded by ε).
    """

    rows: np.ndarray
    rec: np.ndarray
    code: np.ndarray
    item: np.ndarray
    items: Mapping[int, tuple[int, ...]]
    ul_generalization: float
    ul_suppression: float
    suppressed: int

    @property
    def ul(self) -> float:
        return self.ul_generalization + self.ul_suppression


class ItemCodes(Mapping[int, tuple[int, ...]]):
    """GenDiag's item id → sorted code ids, built on first use.

    Why lazy: ArtUC's merge step runs GenDiag on every feasible partner and compares only
    their UL; the mapping (a tuple per item) is read for the few results that are released.
    """

    __slots__ = ("_label", "_uniq", "_built")

    def __init__(self, label: np.ndarray, uniq: np.ndarray) -> None:
        self._label, self._uniq = label, uniq
        self._built: dict[int, tuple[int, ...]] | None = None

    def _mapping(self) -> dict[int, tuple[int, ...]]:
        if self._built is None:
            self._built = _items_by_label(self._label, self._uniq)
        return self._built

    def __getitem__(self, key: int) -> tuple[int, ...]:
        return self._mapping()[key]

    def __iter__(self) -> Iterator[int]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())

    def __repr__(self) -> str:
        return repr(self._mapping())


def record_ul(n: int, rec: np.ndarray, item: np.ndarray, size: np.ndarray,
              weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per record: Σ_ũ UL(ũ) / (2^σ − 1) and s(r) (Def. 5–6).

    ``size[item]`` is |ũ|; singletons cost 0. Written as 2^(|ũ|−σ)·(1−2^−|ũ|)/(1−2^−σ) so
    generalized codes of hundreds of codes do not overflow. ``weight[item]`` is w(ũ)
    (Def. 5); None means every w(ũ) = 1. s(r) is a count of codes and takes no weight.
    """
    kept = item >= 0
    width = int(item.max()) + 1 if len(item) else 1
    pairs = _distinct(rec[kept] * width + item[kept])
    owner, z = pairs // width, size[pairs % width].astype(float)
    sigma = np.bincount(owner, weights=z, minlength=n)
    term = np.where(z >= 2, np.exp2(z - sigma[owner]) * (1 - np.exp2(-z)), 0.0)
    if weight is not None:
        term = term * weight[pairs % width]
    num = np.bincount(owner, weights=term, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        gen = np.where(sigma > 0, num / (1 - np.exp2(-sigma)), 0.0)
    return gen, np.bincount(rec[~kept], minlength=n).astype(float)


#: exp2(−i) for i = 0, 1, …, as NumPy computes it: ``record_ul`` only takes exp2 of integers
#: x ≤ 0, so the compiled UL (``gendiag_kernel.unweighted_ul``) reads them here and its floats
#: are NumPy's (below this table exp2 is 0: 2^−1075 rounds to 0).
#: ``tests/test_artuc_gendiag_compiled.py`` holds NumPy's exp2 to this table.
_POW2 = np.exp2(-np.arange(1100, dtype=np.float64))
_POW2.flags.writeable = False


def gendiag(table: CodeTable, rows: np.ndarray, k: int, m: int, *,
            full_queue: bool = False, compiled: bool = True) -> CodeGeneralization:
    """Run GenDiag on the records ``rows`` (dataset row indices) of one cluster.

    ``compiled=False`` runs the pure-Python loop: the reference the compiled one is tested
    against (both return the same result, field by field).
    """
    if compiled and _compiles(len(rows), len(table.code_set), k, m, full_queue):
        if table.weight is None:  # record_ul in compiled code too, with the same floats
            rec, code, uniq, item, label, gen, dropped, count = gendiag_kernel.unweighted_gendiag(
                table.indptr, table.indices, table.code_set, np.asarray(rows, dtype=np.int64),
                k, m, _POW2)
            return CodeGeneralization(rows, rec, code.astype(table.indices.dtype, copy=False),
                                      item, ItemCodes(label, uniq), float(gen.sum()),
                                      float(dropped), int(count))
        rec, code, uniq, item, label, size, suppressed_codes = _run_compiled(table, rows, k, m)
    else:
        rec, code = table.gather(rows)
        uniq, local = _compact(code, len(table.code_set))
        state = _Items(len(rows), rec, local, table.code_set[uniq])
        queue = (FullQueue if full_queue or m > 2 else BorderQueue)(state, k, m, rec, local)
        queue.run()
        roots = _roots(np.array(state.parent, dtype=np.int64))
        label = np.where(np.array(state.suppressed, dtype=bool)[roots], -1, roots)
        item = label[local]
        size = np.bincount(label[label >= 0], minlength=len(uniq))
        suppressed_codes = state.suppressed_codes
    items = ItemCodes(label, uniq)
    weight = None
    if table.weight is not None:  # w(ũ): the largest weight of its codes (Def. 5)
        weight = np.ones(len(uniq))
        for lab, codes in items.items():
            weight[lab] = float(table.weight[list(codes)].max())
    gen, sup = record_ul(len(rows), rec, item, size, weight)
    return CodeGeneralization(rows, rec, code, item, items,
                              float(gen.sum()), float(sup.sum()), suppressed_codes)


class ULBatch:
    """The UL GenDiag gives each of several clusters, without building their results.

    Why: ArtUC's partner search runs GenDiag on every feasible partner of a cluster and reads
    only each result's UL (the winner's result is computed again, in full). For unweighted
    tables whose calls all take the compiled loop, :meth:`run` does a whole share of the
    batch in one compiled call (:func:`.gendiag_kernel.unweighted_uls`, no GIL); otherwise it
    calls :func:`gendiag` per cluster. Either way each UL is the float ``gendiag(...).ul``
    is: the same per-record values, added by the same NumPy sum.

    :meth:`run` may be called from several threads at once on disjoint calls.
    """

    def __init__(self, table: CodeTable, clusters: Sequence[np.ndarray], k: int, m: int):
        self._table, self._clusters, self._k, self._m = table, clusters, k, m
        d = len(table.code_set)
        self.compiled = table.weight is None and all(
            _compiles(len(r), d, k, m, False) for r in clusters)
        sizes = np.array([len(r) for r in clusters], dtype=np.int64)
        self._bounds = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(sizes)])
        self._gen = np.zeros(int(self._bounds[-1]), dtype=np.float64)
        self._dropped = np.zeros(len(clusters), dtype=np.int64)
        self._ul: list[float] = [0.0] * len(clusters)
        self._rows = (np.concatenate([np.asarray(r, dtype=np.int64) for r in clusters])
                      if self.compiled and len(clusters) else np.empty(0, dtype=np.int64))

    def run(self, calls: np.ndarray) -> None:
        """Compute the calls ``calls`` (positions in ``clusters``)."""
        if self.compiled:
            t = self._table
            gendiag_kernel.unweighted_uls(
                t.indptr, t.indices, t.code_set, self._rows, self._bounds,
                np.asarray(calls, dtype=np.int64), self._k, self._m, _POW2, self._gen,
                self._dropped)
            return
        for c in np.asarray(calls).tolist():
            self._ul[c] = gendiag(self._table, self._clusters[c], k=self._k, m=self._m).ul

    def uls(self) -> list[float]:
        """Every cluster's UL, in order (after every call has run)."""
        if not self.compiled:
            return list(self._ul)
        b = self._bounds.tolist()
        return [float(self._gen[b[c]:b[c + 1]].sum()) + float(self._dropped[c])
                for c in range(len(self._clusters))]


def _run_compiled(table: CodeTable, rows: np.ndarray, k: int, m: int
                  ) -> tuple[np.ndarray, ...]:
    """The Python path's set-up, :class:`BorderQueue`'s loop and the labelling, in compiled
    code (:mod:`.gendiag_kernel`): (rec, code, uniq, item, label, size, suppressed codes)."""
    rec, code, uniq, local, sets, n_sets = gendiag_kernel.cluster_codes(
        table.indptr, table.indices, table.code_set, np.asarray(rows, dtype=np.int64))
    sup = np.bincount(local, minlength=len(uniq))
    parent, suppressed, count = gendiag_kernel.border_run(len(rows), rec, local, sets, n_sets,
                                                          sup, k, m)
    label, item, size = gendiag_kernel.item_labels(parent, suppressed, local)
    return rec, code.astype(table.indices.dtype, copy=False), uniq, item, label, size, int(count)


def runs_compiled(table: CodeTable, k: int, m: int) -> bool:
    """Whether every GenDiag call on ``table`` (any cluster of its records) takes the
    compiled loop — which releases the GIL, so such calls can share threads."""
    return _compiles(len(table.indptr) - 1, len(table.code_set), k, m, full_queue=False)


def _compiles(n: int, d: int, k: int, m: int, full_queue: bool) -> bool:
    """Whether the compiled loop takes this call: BorderQueue (m ≤ 2), int64 Q keys, and
    partner keys (size, −support, mincode) that fit 62 bits (``d``: the table's codes, an
    upper bound on the cluster's)."""
    return (not full_queue and m <= 2 and k < _INT64_KEYS_BELOW_K and d < 1 << _ID_BITS
            and 2 * max(1, d.bit_length()) + max(1, n.bit_length()) <= 62)


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for an int array, by sorting: numpy's hash-based unique is
    several times slower on GenDiag's few thousand keys."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    first = np.empty(len(ordered), dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]


def _compact(code: np.ndarray, n_codes: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(code, return_inverse=True)`` for code ids below ``n_codes``: a presence
    table and its running count instead of a sort."""
    present = np.zeros(n_codes, dtype=bool)
    present[code] = True
    uniq = np.flatnonzero(present)
    rank = np.cumsum(present) - 1
    return uniq, rank[code]


def _roots(parent: np.ndarray) -> np.ndarray:
    """Union-find roots of every item at once (pointer jumping instead of one find each)."""
    roots = parent
    while True:
        up = parent[roots]
        if np.array_equal(up, roots):
            return roots
        roots = up


def _items_by_label(label: np.ndarray, uniq: np.ndarray) -> dict[int, tuple[int, ...]]:
    """item id → its sorted code ids, keyed in order of each item's smallest local code."""
    kept = np.flatnonzero(label >= 0)
    order = kept[np.argsort(label[kept], kind="stable")]
    if not len(order):
        return {}
    ordered = label[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    codes = uniq[order].tolist()
    ends = [*starts[1:].tolist(), len(codes)]
    bounds = starts.tolist()
    labels = ordered[starts].tolist()
    return {labels[g]: tuple(codes[bounds[g]:ends[g]])
            for g in np.argsort(order[starts]).tolist()}


