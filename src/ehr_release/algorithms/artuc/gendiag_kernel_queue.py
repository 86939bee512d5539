"""The compiled GenDiag's queue Q (numba): a binary heap of int64 keys — (k − support) | pair
bit | a | b — with lazy deletion and purges, and the initial Q of a cluster. The loop in
:mod:`.gendiag_kernel` pushes and pops it; the layout of a key is
:mod:`.gendiag_queues`' ``_ID_BITS`` encoding.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ehr_release.algorithms.artuc.gendiag_kernel_setup import (  # noqa: F401
    cluster_codes,
    item_labels,
    unweighted_ul,
)

ID_BITS = 24  # as gendiag._ID_BITS: Q keys are (k − support) | pair bit | a | b


_MASK = (1 << ID_BITS) - 1


_SHIFT = 2 * ID_BITS + 1


_PAIR = 1 << (2 * ID_BITS)


_PURGE_EVERY = 1024


_PURGE_WHEN_ALIVE = 0.6


_PAIR_MATRIX_MAX = 1024  # initial pairs counted in an n_freq² matrix up to this many items


_DIRTY_MAX = 4  # a fix changes at most two frequent items (the two sides of a pair)


@intrinsic
def _ctpop(typingctx, x):  # noqa: ARG001 (numba's intrinsic signature)
    """Population count of a uint64, as an int64 (LLVM's ctpop: one instruction on x86-64)."""
    sig = types.int64(types.uint64)

    def codegen(context, builder, signature, args):  # noqa: ARG001
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, [args[0]])

    return sig, codegen


# ----------------------------------------------------------------- Q (int64 keys)
@njit(cache=True, nogil=True, inline="always")
def _q_sift_down(q: np.ndarray, pos: int, end: int) -> None:
    """Q is a 4-ary heap: half the levels of a binary one, for pops that mostly find stale
    entries. (``border_run``'s loop writes the same steps out for its pops: called there,
    with q an argument, it cost two atomic reference-count updates per pop.)"""
    key = q[pos]
    while True:
        first = 4 * pos + 1
        if first >= end:
            break
        child = first
        best = q[first]
        last = min(first + 4, end)
        for c in range(first + 1, last):
            if q[c] < best:
                best = q[c]
                child = c
        if best >= key:
            break
        q[pos] = best
        pos = child
    q[pos] = key


@njit(cache=True, nogil=True)
def _q_room(q: np.ndarray, qlen: int, more: int) -> np.ndarray:
    """q with room for ``more`` pushes after its qlen entries: q itself, or a larger copy.

    Why room is made before a flush, not in each push: an inlined helper that returns an
    array (or a loop variable reassigned in it) costs numba two atomic reference-count
    updates per call, and pushes are among the kernel's most frequent operations.
    """
    if qlen + more <= len(q):
        return q
    grown = np.empty(2 * (qlen + more) + 16, dtype=np.int64)
    grown[:qlen] = q[:qlen]
    return grown


@njit(cache=True, nogil=True, inline="always")
def _q_push(q: np.ndarray, qlen: int, key: int) -> None:
    """Push ``key`` at position qlen (the caller counts and made room: ``_q_room``)."""
    pos = qlen
    q[pos] = key
    while pos > 0:
        up = (pos - 1) // 4
        if q[up] <= q[pos]:
            break
        t = q[up]
        q[up] = q[pos]
        q[pos] = t
        pos = up
    return q


@njit(cache=True, nogil=True)
def _q_purge(q: np.ndarray, qlen: int, alive: np.ndarray) -> int:
    """Drop the entries of dead items (they never come back to life); returns the new length."""
    out = 0
    for i in range(qlen):
        key = q[i]
        a = (key >> ID_BITS) & _MASK
        if alive[a] and (not key & _PAIR or alive[key & _MASK]):
            q[out] = key
            out += 1
    for pos in range((out - 2) // 4, -1, -1):
        _q_sift_down(q, pos, out)
    return out


@njit(cache=True, nogil=True)
def initial_q(
    n_records: int,
    rec: np.ndarray,
    local: np.ndarray,
    sup: np.ndarray,
    k: int,
    m: int,
    matrix_max: int,
) -> np.ndarray:
    """``gendiag.initial_q``: the infrequent items, and for m ≥ 2 the co-occurring pairs of
    frequent items below k, as Q keys (unordered). Pairs are counted in a matrix when there
    are at most ``matrix_max`` frequent items, else by sorting."""
    d = len(sup)
    singles = 0
    for a in range(d):
        singles += sup[a] < k
    per_record = np.zeros(n_records + 1, dtype=np.int64)
    if m >= 2:
        for i in range(len(rec)):
            if sup[local[i]] >= k:
                per_record[rec[i] + 1] += 1
    n_pairs = 0
    for r in range(n_records):
        n_pairs += per_record[r + 1] * (per_record[r + 1] - 1) // 2
        per_record[r + 1] += per_record[r]
    items = np.empty(per_record[n_records], dtype=np.int64)
    fill = per_record[:n_records].copy()
    if m >= 2:
        for i in range(len(rec)):
            if sup[local[i]] >= k:
                items[fill[rec[i]]] = local[i]
                fill[rec[i]] += 1
    q = np.empty(singles + n_pairs + 1, dtype=np.int64)  # + 1: the last, unkept write
    at = 0
    for a in range(d):
        if sup[a] < k:
            q[at] = (k - sup[a]) << _SHIFT | a << ID_BITS
            at += 1
    frequent = np.flatnonzero(sup >= k) if m >= 2 else np.empty(0, dtype=np.int64)
    n_freq = len(frequent)
    if n_freq <= matrix_max:  # count in a matrix of frequent × frequent items
        fid = np.full(d, -1, dtype=np.int64)
        for i in range(n_freq):
            fid[frequent[i]] = i
        count = np.zeros((n_freq, n_freq), dtype=np.int32)  # ≤ n_records
        for i in range(len(items)):  # once per occurrence, not once per pair
            items[i] = fid[items[i]]
        for r in range(n_records):
            for i in range(per_record[r], per_record[r + 1]):
                for j in range(i + 1, per_record[r + 1]):
                    x, y = items[i], items[j]
                    if x < y:
                        count[x, y] += 1
                    else:
                        count[y, x] += 1
        for x in range(n_freq):  # written at q[at] always, kept by the count: no branch on
            head = _PAIR | frequent[x] << ID_BITS  # ``both``, whose outcome is unpredictable
            for y in range(x + 1, n_freq):
                both = np.int64(count[x, y])
                q[at] = (k - both) << _SHIFT | head | frequent[y]
                at += (both > 0) & (both < k)
        return q[:at]
    pairs = np.empty(n_pairs, dtype=np.int64)  # many frequent items: sort the pairs
    p = 0
    for r in range(n_records):
        for i in range(per_record[r], per_record[r + 1]):
            for j in range(i + 1, per_record[r + 1]):
                x, y = items[i], items[j]
                pairs[p] = x * d + y if x < y else y * d + x
                p += 1
    pairs.sort()
    start = 0
    while start < n_pairs:
        end = start + 1
        while end < n_pairs and pairs[end] == pairs[start]:
            end += 1
        both = end - start
        if both < k:
            x, y = pairs[start] // d, pairs[start] % d
            q[at] = (k - both) << _SHIFT | _PAIR | x << ID_BITS | y
            at += 1
        start = end
    return q[:at]
