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


@njit(cache=True, nogil=True)
def exact_cost(gen: np.ndarray, sup_x: np.ndarray, sup_v: np.ndarray, vals: np.ndarray,
               row: np.ndarray) -> float:
    """A-GS cost of the representative (``gen``, ``sup_x``) with one candidate ``vals``.

    ``gen[h, v]``: generalizing x_h with value v, both sides, minus v's suppression;
    ``row``: scratch of length ≥ len(vals) + 1.
    """
    n = len(vals)
    for j in range(n + 1):
        row[j] = 0.0
    for h in range(gen.shape[0]):
        s = sup_x[h]
        diag_src = row[0]
        run = row[0] + s
        row[0] = run
        for j in range(1, n + 1):
            diag = diag_src + gen[h, vals[j - 1]]
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
def exact_costs(gen: np.ndarray, sup_x: np.ndarray, sup_v: np.ndarray, flat: np.ndarray,
                starts: np.ndarray, lens: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """:func:`exact_cost` for the distinct trajectories ``ids`` (pairs ``flat[starts:]``)."""
    out = np.empty(len(ids))
    row = np.empty(int(lens.max()) + 1 if len(lens) else 1)
    for c in range(len(ids)):
        d = ids[c]
        out[c] = exact_cost(gen, sup_x, sup_v, flat[starts[d]:starts[d] + lens[d]], row)
    return out


@njit(cache=True, nogil=True)
def tight_bound(x_side: np.ndarray, y_min: np.ndarray, sup_x: np.ndarray, sup_v: np.ndarray,
                vals: np.ndarray, best_x: np.ndarray, extra: np.ndarray) -> float:
    """Lower bound on the A-GS cost, both sides of every match (see ``_tight_bounds``).

    ``best_x`` (length m) and ``extra`` (length ≥ len(vals)) are scratch.
    """
    n, m = len(vals), len(sup_x)
    y_part = 0.0
    for j in range(n):
        y_part += y_min[vals[j]]
    if n > m:  # the candidate drops its n − m cheapest extras
        for j in range(n):
            extra[j] = sup_v[vals[j]] - y_min[vals[j]]
        part = np.sort(extra[:n])
        for j in range(n - m):
            y_part += part[j]
    if m == 0:
        return y_part
    for h in range(m):
        best_x[h] = sup_x[h]
    for j in range(n):
        v = vals[j]
        for h in range(m):
            if x_side[v, h] < best_x[h]:
                best_x[h] = x_side[v, h]
    bound = y_part
    for h in range(m):
        bound += best_x[h]
    if m > n:  # the representative drops its m − n cheapest surplus pairs
        gap = np.empty(m)
        for h in range(m):
            gap[h] = sup_x[h] - best_x[h]
        gap.sort()
        for h in range(m - n):
            bound += gap[h]
    return bound


@njit(cache=True, nogil=True)
def pruned_nearest(order: np.ndarray, quick: np.ndarray, best_cost: float, best_id: int,
                   tol: float, gen: np.ndarray, x_side: np.ndarray, y_min: np.ndarray,
                   sup_x: np.ndarray, sup_v: np.ndarray, flat: np.ndarray, starts: np.ndarray,
                   lens: np.ndarray) -> tuple[float, int, int]:
    """Least (exact cost, id) over ``order`` (sorted by ``quick`` bound) and the best so far.

    Stops at the first quick bound above the best cost + ``tol``; skips a candidate whose
    tight bound is. Returns (cost, id, exact costs computed).
    """
    m = len(sup_x)
    width = int(lens.max()) if len(lens) else 0
    row = np.empty(width + 1)
    extra = np.empty(max(width, 1))
    best_x = np.empty(max(m, 1))
    evaluated = 0
    for c in range(len(order)):
        if quick[c] > best_cost + tol:
            break
        d = order[c]
        vals = flat[starts[d]:starts[d] + lens[d]]
        if tight_bound(x_side, y_min, sup_x, sup_v, vals, best_x, extra) > best_cost + tol:
            continue
        cost = exact_cost(gen, sup_x, sup_v, vals, row)
        evaluated += 1
        if cost < best_cost or (cost == best_cost and d < best_id):
            best_cost, best_id = cost, d
    return best_cost, best_id, evaluated


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


@njit(cache=True, nogil=True)
def tight_bounds(x_side: np.ndarray, y_min: np.ndarray, sup_x: np.ndarray, sup_v: np.ndarray,
                 flat: np.ndarray, starts: np.ndarray, lens: np.ndarray, ids: np.ndarray
                 ) -> np.ndarray:
    """:func:`tight_bound` for the distinct trajectories ``ids``."""
    out = np.empty(len(ids))
    extra = np.empty(max(int(lens.max()) if len(lens) else 0, 1))
    best_x = np.empty(max(len(sup_x), 1))
    for c in range(len(ids)):
        d = ids[c]
        out[c] = tight_bound(x_side, y_min, sup_x, sup_v, flat[starts[d]:starts[d] + lens[d]],
                             best_x, extra)
    return out


@njit(cache=True, nogil=True)
def value_tables(icd_x: np.ndarray, age_x: np.ndarray, icd_y: np.ndarray, age_y: np.ndarray,
                 code_of: np.ndarray, age_of: np.ndarray, sup_v: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The representative's costs against every pair value (the last value is padding).

    ``icd_x[h, c]``/``age_x[h, a]``: x_h's side of generalizing with code c / age a;
    ``icd_y``/``age_y``: the value's side. Returns ``gen[h, v]`` = (x side + value side) −
    the value's suppression, ``x_side[v, h]``, ``y_min[v]`` (cheapest value side) and
    ``y_best[v]`` (cheapest fate: suppression, or generalization counting both sides).
    """
    m, count = icd_x.shape[0], len(code_of)
    gen = np.empty((m, count))
    x_side = np.zeros((count, m))
    y_min = np.zeros(count)
    y_best = np.empty(count)
    for v in range(count - 1):
        c, a, sv = code_of[v], age_of[v], sup_v[v]
        lowest_y, lowest_gen = np.inf, 0.0
        for h in range(m):
            xs = icd_x[h, c] + age_x[h, a]
            oy = icd_y[h, c] + age_y[h, a]
            g = xs + oy
            g = g - sv
            x_side[v, h] = xs
            gen[h, v] = g
            lowest_y = oy if oy < lowest_y else lowest_y
            lowest_gen = g if g < lowest_gen else lowest_gen
        y_min[v] = lowest_y
        y_best[v] = sv + lowest_gen
    last = count - 1  # padding: costs nothing
    for h in range(m):
        gen[h, last] = 0.0 - sup_v[last]
    y_best[last] = sup_v[last]
    return gen, x_side, y_min, y_best


@njit(cache=True, nogil=True)
def quick_bound(y_best: np.ndarray, surplus: np.ndarray, m: int, vals: np.ndarray) -> float:
    """Each candidate pair's cheapest fate, plus the representative's cheapest surplus."""
    total = 0.0
    for j in range(len(vals)):
        total += y_best[vals[j]]
    if m > len(vals):
        total += surplus[m - len(vals)]
    return total


@njit(cache=True, nogil=True)
def quick_bounds(y_best: np.ndarray, surplus: np.ndarray, m: int, flat: np.ndarray,
                 starts: np.ndarray, lens: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """:func:`quick_bound` for the distinct trajectories ``ids``."""
    out = np.empty(len(ids))
    for c in range(len(ids)):
        d = ids[c]
        out[c] = quick_bound(y_best, surplus, m, flat[starts[d]:starts[d] + lens[d]])
    return out


@njit(cache=True, nogil=True)
def nearest(alive: np.ndarray, first: int, tol: float, y_best: np.ndarray,
            surplus: np.ndarray, gen: np.ndarray, x_side: np.ndarray, y_min: np.ndarray,
            sup_x: np.ndarray, sup_v: np.ndarray, flat: np.ndarray, starts: np.ndarray,
            lens: np.ndarray) -> tuple[int, int]:
    """The distinct trajectory of ``alive`` cheapest to align with the representative
    (ties: smallest id) and how many exact costs that took.

    Quick bounds for all; exact costs of the ``first`` lowest; then, in increasing quick
    bound order, the others whose bound does not exceed the best cost (see
    :func:`pruned_nearest`).
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
    width = int(lens.max()) if len(lens) else 0
    row = np.empty(width + 1)
    for p in range(k):
        d = alive[low_i[p]]
        cost = exact_cost(gen, sup_x, sup_v, flat[starts[d]:starts[d] + lens[d]], row)
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
    best_cost, best_id, evaluated = pruned_nearest(
        ids[order], bounds[order], best_cost, best_id, tol, gen, x_side, y_min, sup_x, sup_v,
        flat, starts, lens)
    return best_id, evaluated + k
