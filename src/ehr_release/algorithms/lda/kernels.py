"""Compiled inner loops of the A-GS search (numba): exact costs, tight bounds, traceback DP.

The NumPy versions (:func:`~ehr_release.algorithms.lda.align.scan_costs`, the batch bounds
of the clustering) spend most of their time in per-call overhead: a nearest search makes
hundreds of small array operations on ~10 × 64 tables. Here each candidate is one loop in
machine code, and the nearest search tries candidates one at a time in increasing bound
order, so it stops at the first bound above the best exact cost.

Same answers, same bits: the exact cost adds and compares the same floats in the same order
as ``scan_costs`` (E[h, j] = min(E[h−1, j−1] + gen − sy_j, E[h−1, j] + sx_h) then the
running minimum along the row; D = E + S_j with S_j summed left to right), and the
traceback DP evaluates ``alpha · ΔL_ICD + beta · ΔL_Age`` on the same integers as
:func:`~ehr_release.algorithms.lda.align.ags_align` (no fast-math: no reassociation, no
fused multiply-add). Bounds only prune, so their summation order is free (``_TOL`` slack).
"""

from __future__ import annotations

import numpy as np
from numba import njit

DIAG, LEFT, UP = 0, 1, 2


@njit(cache=True, nogil=True, inline="always")
def _gen(icd_x: np.ndarray, age_x: np.ndarray, icd_y: np.ndarray, age_y: np.ndarray,
         h: int, c: int, a: int, sv: float) -> float:
    """Generalizing x_h with a value (code c, age a), both sides, minus its suppression:
    (x side + value side) − suppression, in that order."""
    g = (icd_x[h, c] + age_x[h, a]) + (icd_y[h, c] + age_y[h, a])
    return g - sv


@njit(cache=True, nogil=True)
def value_bounds(icd_x: np.ndarray, age_x: np.ndarray, icd_y: np.ndarray, age_y: np.ndarray,
                 code_of: np.ndarray, age_of: np.ndarray, sup_v: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per pair value v (the last is padding): ``y_min[v]``, its cheapest own side against
    any x_h, and ``y_best[v]``, its cheapest fate — suppression, or generalization with
    some x_h counting both sides.

    ``icd_x[h, c]``/``age_x[h, a]``: x_h's side of generalizing with code c / age a;
    ``icd_y``/``age_y``: the value's side; ``code_of[v]``, ``age_of[v]``: v's code and age.
    """
    m, count = icd_x.shape[0], len(code_of)
    if m == 0:  # nothing to generalize with: every value is suppressed
        return sup_v.copy(), sup_v.copy()
    y_min = np.full(count, np.inf)
    low = np.zeros(count)
    for h in range(m):
        for v in range(count - 1):
            c, a = code_of[v], age_of[v]
            oy = icd_y[h, c] + age_y[h, a]
            if oy < y_min[v]:
                y_min[v] = oy
            g = _gen(icd_x, age_x, icd_y, age_y, h, c, a, sup_v[v])
            if g < low[v]:
                low[v] = g
    y_min[count - 1] = 0.0
    low[count - 1] = 0.0
    return y_min, sup_v + low


@njit(cache=True, nogil=True)
def exact_cost(icd_x: np.ndarray, age_x: np.ndarray, icd_y: np.ndarray, age_y: np.ndarray,
               sup_x: np.ndarray, code_of: np.ndarray, age_of: np.ndarray, sup_v: np.ndarray,
               vals: np.ndarray, row: np.ndarray) -> float:
    """A-GS cost of the representative with one candidate (pair values ``vals``).

    ``row``: scratch of length ≥ len(vals) + 1.
    """
    n = len(vals)
    for j in range(n + 1):
        row[j] = 0.0
    for h in range(len(sup_x)):
        s = sup_x[h]
        diag_src = row[0]
        run = row[0] + s
        row[0] = run
        for j in range(1, n + 1):
            v = vals[j - 1]
            diag = diag_src + _gen(icd_x, age_x, icd_y, age_y, h, code_of[v], age_of[v],
                                   sup_v[v])
            up = row[j] + s
            diag_src = row[j]
            cell = up if up < diag else diag
            run = cell if cell < run else run
            row[j] = run
    total = 0.0
    for j in range(n):
        total += sup_v[vals[j]]
    return row[n] + total


@njit(cache=True, nogil=True)
def exact_costs(icd_x: np.ndarray, age_x: np.ndarray, icd_y: np.ndarray, age_y: np.ndarray,
                sup_x: np.ndarray, code_of: np.ndarray, age_of: np.ndarray, sup_v: np.ndarray,
                flat: np.ndarray, starts: np.ndarray, lens: np.ndarray, ids: np.ndarray
                ) -> np.ndarray:
    """:func:`exact_cost` for the distinct trajectories ``ids`` (pairs ``flat[starts:]``)."""
    out = np.empty(len(ids))
    row = np.empty(int(lens.max()) + 1 if len(lens) else 1)
    for c in range(len(ids)):
        d = ids[c]
        out[c] = exact_cost(icd_x, age_x, icd_y, age_y, sup_x, code_of, age_of, sup_v,
                            flat[starts[d]:starts[d] + lens[d]], row)
    return out


@njit(cache=True, nogil=True, inline="always")
def _sum_smallest(a: np.ndarray, n: int, k: int) -> float:
    """Sum of the k smallest of a[:n] (sorts a[:n] in place; n is small)."""
    for i in range(1, n):
        key = a[i]
        p = i - 1
        while p >= 0 and a[p] > key:
            a[p + 1] = a[p]
            p -= 1
        a[p + 1] = key
    total = 0.0
    for i in range(k):
        total += a[i]
    return total


@njit(cache=True, nogil=True)
def tight_bound(icd_x: np.ndarray, age_x: np.ndarray, y_min: np.ndarray, sup_x: np.ndarray,
                code_of: np.ndarray, age_of: np.ndarray, sup_v: np.ndarray, vals: np.ndarray,
                best_x: np.ndarray, extra: np.ndarray) -> float:
    """Lower bound on the A-GS cost counting both sides of every match.

    Any alignment matches M ≤ min(m, n) pairs. Candidate side: each pair costs ≥ its
    cheapest own-side generalization, and ≥ n − m of them are suppressed instead (add the
    smallest differences). Representative side: each pair costs ≥ the cheaper of
    suppression and its cheapest generalization with one of the candidate's pairs, and
    ≥ m − n of them are suppressed. ``best_x`` (length ≥ m) and ``extra`` (≥ n, ≥ m) are
    scratch.
    """
    n, m = len(vals), len(sup_x)
    y_part = 0.0
    for j in range(n):
        y_part += y_min[vals[j]]
    if n > m:  # the candidate drops its n − m cheapest extras
        for j in range(n):
            extra[j] = sup_v[vals[j]] - y_min[vals[j]]
        y_part += _sum_smallest(extra, n, n - m)
    if m == 0:
        return y_part
    for h in range(m):
        best_x[h] = sup_x[h]
    for j in range(n):
        c, a = code_of[vals[j]], age_of[vals[j]]
        for h in range(m):
            side = icd_x[h, c] + age_x[h, a]
            if side < best_x[h]:
                best_x[h] = side
    bound = y_part
    for h in range(m):
        bound += best_x[h]
    if m > n:  # the representative drops its m − n cheapest surplus pairs
        for h in range(m):
            extra[h] = sup_x[h] - best_x[h]
        bound += _sum_smallest(extra, m, m - n)
    return bound


@njit(cache=True, nogil=True)
def tight_bounds(icd_x: np.ndarray, age_x: np.ndarray, y_min: np.ndarray, sup_x: np.ndarray,
                 code_of: np.ndarray, age_of: np.ndarray, sup_v: np.ndarray, flat: np.ndarray,
                 starts: np.ndarray, lens: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """:func:`tight_bound` for the distinct trajectories ``ids``."""
    out = np.empty(len(ids))
    width = max(int(lens.max()) if len(lens) else 0, len(sup_x), 1)
    extra, best_x = np.empty(width), np.empty(width)
    for c in range(len(ids)):
        d = ids[c]
        out[c] = tight_bound(icd_x, age_x, y_min, sup_x, code_of, age_of, sup_v,
                             flat[starts[d]:starts[d] + lens[d]], best_x, extra)
    return out


@njit(cache=True, nogil=True)
def quick_bounds(y_best: np.ndarray, surplus: np.ndarray, m: int, flat: np.ndarray,
                 starts: np.ndarray, lens: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per distinct trajectory of ``ids``: each pair's cheapest fate (``y_best``), plus the
    representative's cheapest ``surplus`` if it is longer (the hot loop of a nearest
    search: every remaining trajectory, so written out without slices)."""
    out = np.empty(len(ids))
    for c in range(len(ids)):
        d = ids[c]
        start, n = starts[d], lens[d]
        total = 0.0
        for j in range(start, start + n):
            total += y_best[flat[j]]
        if m > n:
            total += surplus[m - n]
        out[c] = total
    return out


@njit(cache=True, nogil=True)
def nearest(alive: np.ndarray, first: int, tol: float, y_best: np.ndarray,
            surplus: np.ndarray, y_min: np.ndarray, icd_x: np.ndarray, age_x: np.ndarray,
            icd_y: np.ndarray, age_y: np.ndarray, sup_x: np.ndarray, code_of: np.ndarray,
            age_of: np.ndarray, sup_v: np.ndarray, flat: np.ndarray, starts: np.ndarray,
            lens: np.ndarray) -> tuple[int, int]:
    """The distinct trajectory of ``alive`` cheapest to align with the representative
    (ties: smallest id) and how many exact costs that took.

    Quick bounds of all; exact costs of the ``first`` lowest; then the others whose quick
    bound does not exceed the best cost + ``tol``, one at a time in increasing quick bound
    order: a tight bound, then the exact cost if the tight bound does not exceed the best
    either, stopping at the first quick bound that does. The order among equal bounds does
    not matter: the answer is the least (cost, id) of all that could win or tie.
    """
    m = len(sup_x)
    quick = quick_bounds(y_best, surplus, m, flat, starts, lens, alive)
    # the `first` lowest quick bounds (insertion into a short sorted list)
    k = min(first, len(alive))
    low_b = np.full(k, np.inf)
    low_i = np.full(k, -1, dtype=np.int64)
    for i in range(len(alive)):
        b = quick[i]
        if k and b < low_b[k - 1]:
            p = k - 1
            while p > 0 and low_b[p - 1] > b:
                low_b[p], low_i[p] = low_b[p - 1], low_i[p - 1]
                p -= 1
            low_b[p], low_i[p] = b, i
    best_cost, best_id = np.inf, -1
    width = max(int(lens.max()) if len(lens) else 0, m, 1)
    row, extra, best_x = np.empty(width + 1), np.empty(width), np.empty(width)
    for p in range(k):
        d = alive[low_i[p]]
        cost = exact_cost(icd_x, age_x, icd_y, age_y, sup_x, code_of, age_of, sup_v,
                          flat[starts[d]:starts[d] + lens[d]], row)
        if cost < best_cost or (cost == best_cost and d < best_id):
            best_cost, best_id = cost, d
        quick[low_i[p]] = np.inf  # done
    limit = best_cost + tol
    count = 0
    for i in range(len(alive)):
        if quick[i] <= limit:
            count += 1
    ids = np.empty(count, dtype=np.int64)
    bounds = np.empty(count)
    count = 0
    for i in range(len(alive)):
        if quick[i] <= limit:
            ids[count], bounds[count] = alive[i], quick[i]
            count += 1
    order = np.argsort(bounds)
    evaluated = k
    for i in range(len(order)):
        if bounds[order[i]] > best_cost + tol:
            break
        d = ids[order[i]]
        vals = flat[starts[d]:starts[d] + lens[d]]
        if tight_bound(icd_x, age_x, y_min, sup_x, code_of, age_of, sup_v, vals, best_x,
                       extra) > best_cost + tol:
            continue
        cost = exact_cost(icd_x, age_x, icd_y, age_y, sup_x, code_of, age_of, sup_v, vals, row)
        evaluated += 1
        if cost < best_cost or (cost == best_cost and d < best_id):
            best_cost, best_id = cost, d
    return best_id, evaluated


@njit(cache=True, nogil=True)
def ags_table(sxi: np.ndarray, sxa: np.ndarray, syi: np.ndarray, sya: np.ndarray,
              gi: np.ndarray, ga: np.ndarray, al: float, be: float
              ) -> tuple[int, int, np.ndarray]:
    """The A-GS table of one pair (thesis Algorithm 3): (ΔL_ICD, ΔL_Age, way)."""
    m, n = len(sxi), len(syi)
    ci = np.zeros((m + 1, n + 1), dtype=np.int64)
    ca = np.zeros((m + 1, n + 1), dtype=np.int64)
    way = np.full((m + 1, n + 1), LEFT, dtype=np.int8)
    for h in range(1, m + 1):
        ci[h, 0], ca[h, 0], way[h, 0] = ci[h - 1, 0] + sxi[h - 1], ca[h - 1, 0] + sxa[h - 1], UP
    for j in range(1, n + 1):
        ci[0, j], ca[0, j] = ci[0, j - 1] + syi[j - 1], ca[0, j - 1] + sya[j - 1]
    for h in range(1, m + 1):
        for j in range(1, n + 1):
            bi, ba = ci[h - 1, j - 1] + gi[h - 1, j - 1], ca[h - 1, j - 1] + ga[h - 1, j - 1]
            best, choice = al * bi + be * ba, DIAG
            ti, ta = ci[h, j - 1] + syi[j - 1], ca[h, j - 1] + sya[j - 1]
            cost = al * ti + be * ta
            if cost < best:
                bi, ba, best, choice = ti, ta, cost, LEFT
            ti, ta = ci[h - 1, j] + sxi[h - 1], ca[h - 1, j] + sxa[h - 1]
            if al * ti + be * ta < best:
                bi, ba, choice = ti, ta, UP
            ci[h, j], ca[h, j], way[h, j] = bi, ba, choice
    return ci[m, n], ca[m, n], way
