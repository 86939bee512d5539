"""GenDiag's main loop (BorderQueue, m ≤ 2) compiled with numba: same choices, same output.

Why: ArtUC's merge step runs GenDiag on C ∪ C′ for every feasible partner — thousands of
calls — and the pure-Python loop (:class:`~ehr_release.algorithms.artuc.gendiag.BorderQueue`)
spends its time in interpreter overhead on small ints (heap entries, bitset ANDs, popcounts).
This is the same loop on arrays: postings are rows of 64-bit words, Q is an int64 heap with
the same keys, and each code set's partner heap is a slice of one table.

Same output: the loop only compares integers (no float is touched here; UL is computed
afterwards by the NumPy code, unchanged). Every choice is a minimum over a total order, so the
heap implementations may differ from Python's ``heapq``:

* Q: the live entries (every alive infrequent item, every infrequent co-occurring pair of
  alive frequent items, at its current support) are a function of the state; equal keys are
  equal ints, so which copy is popped cannot matter. Pushes are those of ``BorderQueue``
  (a fix's changed pairs, once per fix); stale entries are skipped as there.
* Partners: the valid entries of a code set are its alive items, ordered by
  (size, −support, mincode) — mincodes of alive items differ, so there are no ties.
* Each fix is GenDiag's generic loop (:meth:`~ehr_release.algorithms.artuc.gendiag._Queue.fix`):
  keys ``(|u|+|v|, −sup v, mincode v, mincode u)`` never tie either (the mincodes differ).

``tests/test_artuc_gendiag_compiled.py`` holds every result field equal to the Python loop.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

ID_BITS = 24  # as gendiag._ID_BITS: Q keys are (k − support) | pair bit | a | b
_MASK = (1 << ID_BITS) - 1
_SHIFT = 2 * ID_BITS + 1
_PAIR = 1 << (2 * ID_BITS)
_PURGE_EVERY = 1024
_PURGE_WHEN_ALIVE = 0.6
_DIRTY_MAX = 4  # a fix changes at most two frequent items (the two sides of a pair)


@intrinsic
def _ctpop(typingctx, x):  # noqa: ARG001 (numba's intrinsic signature)
    """Population count of a uint64, as an int64 (LLVM's ctpop: one instruction on x86-64)."""
    sig = types.int64(types.uint64)

    def codegen(context, builder, signature, args):  # noqa: ARG001
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, [args[0]])

    return sig, codegen


@njit(cache=True, nogil=True)
def _and_count(post: np.ndarray, a: int, b: int) -> int:
    total = 0
    for w in range(post.shape[1]):
        total += _ctpop(post[a, w] & post[b, w])
    return total


# ----------------------------------------------------------------- partner heaps (4 columns)
@njit(cache=True, nogil=True)
def _ph_less(ph: np.ndarray, i: int, j: int) -> bool:
    for c in range(4):
        if ph[i, c] != ph[j, c]:
            return ph[i, c] < ph[j, c]
    return False


@njit(cache=True, nogil=True)
def _ph_swap(ph: np.ndarray, i: int, j: int) -> None:
    for c in range(4):
        t = ph[i, c]
        ph[i, c] = ph[j, c]
        ph[j, c] = t


@njit(cache=True, nogil=True)
def _ph_push(ph: np.ndarray, base: np.ndarray, cap: np.ndarray, plen: np.ndarray, s: int,
             e0: int, e1: int, e2: int, e3: int) -> None:
    if plen[s] >= cap[s]:
        raise ValueError("GenDiag kernel: partner heap overflow")
    b0 = base[s]
    pos = b0 + plen[s]
    plen[s] += 1
    ph[pos, 0] = e0
    ph[pos, 1] = e1
    ph[pos, 2] = e2
    ph[pos, 3] = e3
    while pos > b0:
        up = b0 + (pos - b0 - 1) // 2
        if not _ph_less(ph, pos, up):
            break
        _ph_swap(ph, pos, up)
        pos = up


@njit(cache=True, nogil=True)
def _ph_pop(ph: np.ndarray, base: np.ndarray, plen: np.ndarray, s: int) -> None:
    """Drop the top entry of code set s's heap."""
    b0 = base[s]
    plen[s] -= 1
    end = b0 + plen[s]
    if end == b0:
        return
    for c in range(4):
        ph[b0, c] = ph[end, c]
    pos = b0
    while True:
        left = b0 + 2 * (pos - b0) + 1
        if left >= end:
            break
        child = left
        if left + 1 < end and _ph_less(ph, left + 1, left):
            child = left + 1
        if not _ph_less(ph, child, pos):
            break
        _ph_swap(ph, pos, child)
        pos = child


# ----------------------------------------------------------------- Q (int64 keys)
@njit(cache=True, nogil=True)
def _q_sift_down(q: np.ndarray, pos: int, end: int) -> None:
    while True:
        left = 2 * pos + 1
        if left >= end:
            return
        child = left
        if left + 1 < end and q[left + 1] < q[left]:
            child = left + 1
        if q[child] >= q[pos]:
            return
        t = q[pos]
        q[pos] = q[child]
        q[child] = t
        pos = child


@njit(cache=True, nogil=True)
def _q_push(q: np.ndarray, qlen: int, key: int) -> np.ndarray:
    """Push ``key`` at position qlen (the caller counts); returns q, grown if it was full."""
    if qlen >= len(q):
        grown = np.empty(2 * len(q) + 16, dtype=np.int64)
        grown[:qlen] = q[:qlen]
        q = grown
    pos = qlen
    q[pos] = key
    while pos > 0:
        up = (pos - 1) // 2
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
    for pos in range(out // 2 - 1, -1, -1):
        _q_sift_down(q, pos, out)
    return out


# ----------------------------------------------------------------- the loop
@njit(cache=True, nogil=True)
def _best_partner(u: int, sets: np.ndarray, alive: np.ndarray, size: np.ndarray,
                  sup: np.ndarray, ph: np.ndarray, base: np.ndarray, cap: np.ndarray,
                  plen: np.ndarray) -> int:
    """The least alive item of u's code set other than u by (size, −support, mincode); −1:
    none. Stale entries on top are dropped, as ``_Items.best_partner`` does."""
    s = sets[u]
    b0 = base[s]
    saved = False
    e0 = e1 = e2 = e3 = 0
    found = -1
    while plen[s] > 0:
        v = ph[b0, 3]
        if alive[v] and size[v] == ph[b0, 0] and sup[v] == -ph[b0, 1]:
            if v != u:
                found = v
                break
            if not saved:  # u's own entry: set it aside while looking below it
                saved = True
                e0, e1, e2, e3 = ph[b0, 0], ph[b0, 1], ph[b0, 2], ph[b0, 3]
        _ph_pop(ph, base, plen, s)
    if saved:
        _ph_push(ph, base, cap, plen, s, e0, e1, e2, e3)
    return found


@njit(cache=True, nogil=True)
def _merge(u: int, v: int, post: np.ndarray, delta: np.ndarray, sets: np.ndarray,
           alive: np.ndarray, size: np.ndarray, sup: np.ndarray, mincode: np.ndarray,
           parent: np.ndarray, ph: np.ndarray, base: np.ndarray, cap: np.ndarray,
           plen: np.ndarray) -> tuple[int, int]:
    """``_Items.merge``: survivor is the better-supported (ties: smaller id); ``delta`` gets
    the records the survivor gained. Returns (survivor, absorbed)."""
    if sup[u] > sup[v] or (sup[u] == sup[v] and u < v):
        keep, gone = u, v
    else:
        keep, gone = v, u
    count = 0
    for w in range(post.shape[1]):
        mine = post[keep, w]
        other = post[gone, w]
        delta[w] = other & ~mine
        both = mine | other
        post[keep, w] = both
        count += _ctpop(both)
    sup[keep] = count
    size[keep] += size[gone]
    if mincode[gone] < mincode[keep]:
        mincode[keep] = mincode[gone]
    alive[gone] = False
    parent[gone] = keep
    _ph_push(ph, base, cap, plen, sets[keep], size[keep], -sup[keep], mincode[keep], keep)
    return keep, gone


@njit(cache=True, nogil=True)
def _forget(x: int, fpos: np.ndarray, farr: np.ndarray, dirty_id: np.ndarray,
            dirty_full: np.ndarray, dirty_bits: np.ndarray, counts: np.ndarray) -> None:
    """x is no longer frequent nor dirty (it died or was suppressed)."""
    at = fpos[x]
    if at >= 0:
        last = farr[counts[0] - 1]
        farr[at] = last
        fpos[last] = at
        fpos[x] = -1
        counts[0] -= 1
    for i in range(counts[1]):
        if dirty_id[i] == x:
            counts[1] -= 1
            last = counts[1]
            dirty_id[i] = dirty_id[last]
            dirty_full[i] = dirty_full[last]
            dirty_bits[i, :] = dirty_bits[last, :]
            return


@njit(cache=True, nogil=True)
def _merged(keep: int, gone: int, k: int, delta: np.ndarray, sup: np.ndarray,
            fpos: np.ndarray, farr: np.ndarray, dirty_id: np.ndarray, dirty_full: np.ndarray,
            dirty_bits: np.ndarray, counts: np.ndarray) -> None:
    """``BorderQueue.merged``: note which pairs of ``keep`` changed (pushed at the flush).

    A survivor still below k needs no Q entry: it is the item being fixed, merged again at
    once, and ends frequent or suppressed (``BorderQueue._grow`` skips it the same way).
    """
    _forget(gone, fpos, farr, dirty_id, dirty_full, dirty_bits, counts)
    if sup[keep] < k:
        return
    if fpos[keep] < 0:  # new frequent item: all its pairs are new
        fpos[keep] = counts[0]
        farr[counts[0]] = keep
        counts[0] += 1
        at, full = -1, True
    else:
        at, full = -1, False
        for i in range(counts[1]):
            if dirty_id[i] == keep:
                at = i
        if at >= 0:
            if not dirty_full[at]:
                for w in range(len(delta)):
                    dirty_bits[at, w] |= delta[w]
            return
    if counts[1] >= _DIRTY_MAX:
        raise ValueError("GenDiag kernel: too many changed items in one fix")
    at = counts[1]
    counts[1] += 1
    dirty_id[at] = keep
    dirty_full[at] = full
    if not full:
        for w in range(len(delta)):
            dirty_bits[at, w] = delta[w]


@njit(cache=True, nogil=True)
def _flush(q: np.ndarray, counts: np.ndarray, k: int, m: int, post: np.ndarray,
           farr: np.ndarray, dirty_id: np.ndarray, dirty_full: np.ndarray,
           dirty_bits: np.ndarray) -> np.ndarray:
    """``BorderQueue._flush``: push the infrequent pairs of the items the fix changed."""
    if m >= 2:
        words = post.shape[1]
        for i in range(counts[1]):
            x = dirty_id[i]
            full = dirty_full[i]
            for j in range(counts[0]):
                y = farr[j]
                hit = full
                if not full:
                    for w in range(words):
                        if post[y, w] & dirty_bits[i, w]:
                            hit = True
                            break
                if not hit:
                    continue
                both = _and_count(post, x, y)
                if both == 0 or both >= k:  # x itself is frequent: both ≥ k leaves it out
                    continue
                lo, hi = (x, y) if x < y else (y, x)
                q = _q_push(q, counts[2], (k - both) << _SHIFT | _PAIR | lo << ID_BITS | hi)
                counts[2] += 1
    counts[1] = 0
    return q


@njit(cache=True, nogil=True)
def _suppress(e: int, alive: np.ndarray, suppressed: np.ndarray, size: np.ndarray,
              fpos: np.ndarray, farr: np.ndarray, dirty_id: np.ndarray,
              dirty_full: np.ndarray, dirty_bits: np.ndarray, counts: np.ndarray) -> None:
    _forget(e, fpos, farr, dirty_id, dirty_full, dirty_bits, counts)
    alive[e] = False
    suppressed[e] = True
    counts[3] += size[e]
    counts[4] -= 1


@njit(cache=True, nogil=True)
def border_run(n_records: int, rec: np.ndarray, local: np.ndarray, sets: np.ndarray,
               n_sets: int, sup: np.ndarray, k: int, m: int,
               q_init: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """GenDiag's loop on one cluster; returns (parent, suppressed, suppressed code count).

    ``rec``/``local``: each code occurrence's record and item (distinct pairs); ``sets``:
    each item's code set, compacted to 0..n_sets−1; ``sup``: each item's support;
    ``q_init``: Q's initial keys (``BorderQueue``'s, see ``initial_q``).
    """
    d = len(sets)
    words = (n_records + 63) // 64
    post = np.zeros((d, words), dtype=np.uint64)
    for i in range(len(rec)):
        r = rec[i]
        post[local[i], r >> 6] |= np.uint64(1) << np.uint64(r & 63)
    sup = sup.astype(np.int64).copy()
    size = np.ones(d, dtype=np.int64)
    mincode = np.arange(d, dtype=np.int64)
    parent = np.arange(d, dtype=np.int64)
    alive = np.ones(d, dtype=np.bool_)
    suppressed = np.zeros(d, dtype=np.bool_)
    # partner heaps: each code set's slice holds its items and one entry per merge at most
    per_set = np.zeros(n_sets, dtype=np.int64)
    for u in range(d):
        per_set[sets[u]] += 1
    cap = 2 * per_set + 2
    base = np.zeros(n_sets, dtype=np.int64)
    for s in range(1, n_sets):
        base[s] = base[s - 1] + cap[s - 1]
    plen = np.zeros(n_sets, dtype=np.int64)
    ph = np.empty((int(cap.sum()), 4), dtype=np.int64)
    for u in range(d):
        _ph_push(ph, base, cap, plen, sets[u], 1, -sup[u], u, u)
    # frequent items (alive, support ≥ k), dirty items of the current fix
    fpos = np.full(d, -1, dtype=np.int64)
    farr = np.empty(max(d, 1), dtype=np.int64)
    # counts: frequent, dirty, Q length, suppressed codes, alive items
    counts = np.zeros(5, dtype=np.int64)
    counts[4] = d
    for u in range(d):
        if sup[u] >= k:
            fpos[u] = counts[0]
            farr[counts[0]] = u
            counts[0] += 1
    dirty_id = np.empty(_DIRTY_MAX, dtype=np.int64)
    dirty_full = np.zeros(_DIRTY_MAX, dtype=np.bool_)
    dirty_bits = np.zeros((_DIRTY_MAX, words), dtype=np.uint64)
    delta = np.zeros(words, dtype=np.uint64)
    q = np.empty(2 * len(q_init) + 16, dtype=np.int64)
    q[:len(q_init)] = q_init
    counts[2] = len(q_init)
    for pos in range(counts[2] // 2 - 1, -1, -1):
        _q_sift_down(q, pos, counts[2])

    alive_at_purge = d
    pops = 0
    check_at = _PURGE_EVERY
    while counts[2] > 0:
        pops += 1
        if pops == check_at:
            check_at += _PURGE_EVERY
            if counts[4] <= _PURGE_WHEN_ALIVE * alive_at_purge:
                counts[2] = _q_purge(q, counts[2], alive)
                alive_at_purge = counts[4]
                if counts[2] == 0:
                    break
        key = q[0]
        counts[2] -= 1
        q[0] = q[counts[2]]
        _q_sift_down(q, 0, counts[2])
        a = (key >> ID_BITS) & _MASK
        need = k - (key >> _SHIFT)
        if not key & _PAIR:
            if not (alive[a] and sup[a] == need):
                continue
            while sup[a] < k:  # fix([a])
                v = _best_partner(a, sets, alive, size, sup, ph, base, cap, plen)
                if v < 0:
                    _suppress(a, alive, suppressed, size, fpos, farr, dirty_id, dirty_full,
                              dirty_bits, counts)
                    break
                a, gone = _merge(a, v, post, delta, sets, alive, size, sup, mincode, parent,
                                 ph, base, cap, plen)
                counts[4] -= 1
                _merged(a, gone, k, delta, sup, fpos, farr, dirty_id, dirty_full,
                        dirty_bits, counts)
        else:
            b = key & _MASK
            if not (alive[a] and alive[b] and _and_count(post, a, b) == need):
                continue
            while _and_count(post, a, b) < k:  # fix([a, b])
                va = _best_partner(a, sets, alive, size, sup, ph, base, cap, plen)
                vb = _best_partner(b, sets, alive, size, sup, ph, base, cap, plen)
                if va < 0 and vb < 0:
                    e = a if (sup[a], mincode[a]) < (sup[b], mincode[b]) else b
                    _suppress(e, alive, suppressed, size, fpos, farr, dirty_id, dirty_full,
                              dirty_bits, counts)
                    break
                take_a = vb < 0 or (va >= 0 and (
                    (size[a] + size[va], -sup[va], mincode[va], mincode[a])
                    < (size[b] + size[vb], -sup[vb], mincode[vb], mincode[b])))
                if take_a:
                    u, v, other = a, va, b
                else:
                    u, v, other = b, vb, a
                keep, gone = _merge(u, v, post, delta, sets, alive, size, sup, mincode,
                                    parent, ph, base, cap, plen)
                counts[4] -= 1
                _merged(keep, gone, k, delta, sup, fpos, farr, dirty_id, dirty_full,
                        dirty_bits, counts)
                if v == other:
                    break
                a, b = keep, other
        q = _flush(q, counts, k, m, post, farr, dirty_id, dirty_full, dirty_bits)
    return parent, suppressed, counts[3]
