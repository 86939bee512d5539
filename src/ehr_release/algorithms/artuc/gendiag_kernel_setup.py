"""The compiled GenDiag's set-up and UL (numba): one cluster's codes gathered and compacted,
its items labelled, and the unweighted UL of every record — the parts of
:mod:`.gendiag_kernel` that run before and after its loop, each called on its own by the
tests that hold them equal to the Python code.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


# ----------------------------------------------------------------- set-up and labels
@njit(cache=True, nogil=True)
def cluster_codes(
    indptr: np.ndarray, indices: np.ndarray, code_set: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """``CodeTable.gather`` and ``gendiag._compact`` in one pass, plus the items' code sets
    compacted to 0..n_sets−1: (rec, code, uniq, local, sets, n_sets)."""
    n = len(rows)
    total = 0
    for i in range(n):
        total += indptr[rows[i] + 1] - indptr[rows[i]]
    rec = np.empty(total, dtype=np.int64)
    code = np.empty(total, dtype=np.int64)
    at = 0
    for i in range(n):
        for p in range(indptr[rows[i]], indptr[rows[i] + 1]):
            rec[at] = i
            code[at] = indices[p]
            at += 1
    rank = np.full(len(code_set), -1, dtype=np.int64)
    for c in code:
        rank[c] = 0
    d = 0
    for c in range(len(code_set)):
        if rank[c] == 0:
            rank[c] = d
            d += 1
    uniq = np.empty(d, dtype=np.int64)
    for c in range(len(code_set)):
        if rank[c] >= 0:
            uniq[rank[c]] = c
    local = np.empty(total, dtype=np.int64)
    for i in range(total):
        local[i] = rank[code[i]]
    values = np.empty(d, dtype=np.int64)
    for u in range(d):
        values[u] = code_set[uniq[u]]
    distinct = np.unique(values)
    sets = np.searchsorted(distinct, values).astype(np.int64)
    return rec, code, uniq, local, sets, len(distinct)


@njit(cache=True, nogil=True)
def item_labels(
    parent: np.ndarray, suppressed: np.ndarray, local: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each item's label (its union-find root, −1 if suppressed), each occurrence's label,
    and each label's number of codes: what ``gendiag`` computes from the Python loop."""
    d = len(parent)
    root = parent.copy()
    for u in range(d):
        x = u
        while root[x] != x:  # path halving: the roots are those of ``parent``
            root[x] = root[root[x]]
            x = root[x]
        root[u] = x
    label = np.empty(d, dtype=np.int64)
    size = np.zeros(d, dtype=np.int64)
    for u in range(d):
        label[u] = -1 if suppressed[root[u]] else root[u]
        if label[u] >= 0:
            size[label[u]] += 1
    item = np.empty(len(local), dtype=np.int64)
    for i in range(len(local)):
        item[i] = label[local[i]]
    return label, item, size


@njit(cache=True, nogil=True, inline="always")
def _pow2(x: float, pow2: np.ndarray) -> float:
    """2^x for an integer-valued x ≤ 0, as ``pow2`` holds it."""
    i = int(-x)
    return pow2[i] if i < len(pow2) else 0.0


@intrinsic
def _cttz(typingctx, x):  # noqa: ARG001 (numba's intrinsic signature)
    """Trailing zero bits of a non-zero uint64, as an int64 (LLVM's cttz: tzcnt on x86-64)."""
    sig = types.int64(types.uint64)

    def codegen(context, builder, signature, args):  # noqa: ARG001
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [i64, ir.IntType(1)])
        fn = builder.module.declare_intrinsic("llvm.cttz", [i64], fnty)
        return builder.call(fn, [args[0], ir.Constant(ir.IntType(1), 1)])

    return sig, codegen


@njit(cache=True, nogil=True)
def unweighted_ul(
    n: int, rec: np.ndarray, item: np.ndarray, size: np.ndarray, pow2: np.ndarray
) -> tuple[np.ndarray, int]:
    """``gendiag.record_ul`` without weights: each record's generalization UL, and the number
    of suppressed occurrences (Σ s(r)).

    The same floats as the NumPy code: every ``exp2`` there takes an integer argument x ≤ 0,
    read here from ``pow2[−x]`` (NumPy's own ``exp2(−i)``, see ``gendiag._POW2``; 0 beyond
    it); and each record's terms are added in the same order (its distinct items ascending,
    as ``record_ul``'s sorted (record, item) pairs, and ``np.bincount`` adds in turn): a
    record's items are bits of a mask over the items ranked in ascending order, read back
    lowest first. ``rec`` is ascending (``cluster_codes``), so a record's occurrences are one
    run.
    """
    d = len(size)
    rank = np.full(d, -1, dtype=np.int64)
    for x in item:
        if x >= 0:
            rank[x] = 0
    n_items = 0
    for x in range(d):
        if rank[x] == 0:
            rank[x] = n_items
            n_items += 1
    z = np.empty(n_items, dtype=np.float64)  # each ranked item's size, and 1 − 2^−size
    keep = np.empty(n_items, dtype=np.float64)
    for x in range(d):
        if rank[x] >= 0:
            z[rank[x]] = float(size[x])
            keep[rank[x]] = 1 - _pow2(-z[rank[x]], pow2)
    mask = np.zeros((n_items + 63) // 64, dtype=np.uint64)
    gen = np.zeros(n, dtype=np.float64)
    dropped = 0
    start = 0
    total = len(rec)
    while start < total:
        r = rec[start]
        lo, hi = len(mask), -1
        end = start
        while end < total and rec[end] == r:
            x = item[end]
            end += 1
            if x < 0:
                dropped += 1
                continue
            at = rank[x]
            w = at >> 6
            mask[w] |= np.uint64(1) << np.uint64(at & 63)
            lo, hi = min(lo, w), max(hi, w)
        sigma = 0.0  # Σ of integers: exact in any order
        for w in range(lo, hi + 1):
            bits = mask[w]
            while bits:
                sigma += z[w << 6 | _cttz(bits)]
                bits &= bits - np.uint64(1)
        num = 0.0
        for w in range(lo, hi + 1):
            bits = mask[w]
            mask[w] = 0
            while bits:
                at = w << 6 | _cttz(bits)
                bits &= bits - np.uint64(1)
                if z[at] >= 2:
                    num += _pow2(z[at] - sigma, pow2) * keep[at]
        if sigma > 0:
            gen[r] = num / (1 - _pow2(-sigma, pow2))
        start = end
    return gen, dropped
