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
