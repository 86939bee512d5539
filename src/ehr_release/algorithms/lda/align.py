"""Aligning two trajectories: A-GS (dynamic programming) and the index-wise Baseline.

A-GS (thesis Algorithm 3) fills (m+1)×(n+1) tables; cell (h, j) is the cheapest way to
anonymize x_1..x_h with y_1..y_j by one of: generalize x_h with y_j (both to their LCA),
suppress y_j, or suppress x_h — ties prefer generalizing, then suppressing y_j, as the
thesis orders its argmin. The anonymized trajectory is read back from (m, n).

Two implementations of the same recurrence (tested to agree):

* :func:`ags_align` — one pair of trajectories, exact integer loss numerators and the
  traceback (builds representatives; the table is filled by compiled code,
  :func:`~ehr_release.algorithms.lda.kernels.ags_table`);
* :func:`ags_costs` — one trajectory against a batch of candidates, weighted cost only,
  vectorized over the candidates and along each row of the table (the leftovers' cluster
  choice; the clustering's search uses the compiled
  :func:`~ehr_release.algorithms.lda.kernels.exact_cost`, tested to give the same bits).

Costs returned are what the alignment *adds* (both sides, integer numerators per attribute);
the thesis also carries ILM(X), ALM(X) of an already-anonymized X, a constant per X.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ehr_release.algorithms.lda import kernels
from ehr_release.algorithms.lda.model import LossModel, Traj

DIAG, LEFT, UP = kernels.DIAG, kernels.LEFT, kernels.UP  # generalize, drop y_j, drop x_h


@dataclass(frozen=True)
class Alignment:
    """An anonymized trajectory and the loss numerators the alignment added."""

    icd: np.ndarray
    age: np.ndarray
    d_icd: int
    d_age: int


@dataclass(frozen=True)
class Batch:
    """Candidates padded to a common length, candidate axis last: ``icd[j, c]``."""

    icd: np.ndarray
    age: np.ndarray
    lens: np.ndarray

    @classmethod
    def of(cls, trajs: list[Traj], model: LossModel) -> Batch:
        lens = np.array([len(t[0]) for t in trajs], dtype=np.int64)
        width = int(lens.max(initial=0))
        icd = np.full((width, len(trajs)), model.icd.root, dtype=np.int64)
        age = np.full((width, len(trajs)), model.age.root, dtype=np.int64)
        for c, (ti, ta) in enumerate(trajs):
            icd[: len(ti), c] = ti
            age[: len(ta), c] = ta
        return cls(icd, age, lens)


# ---------------------------------------------------------------------- A-GS, one pair
def ags_align(model: LossModel, x: Traj, y: Traj) -> Alignment:
    """A-GS of ``x`` and ``y`` with traceback (thesis Algorithm 3, weights in ``model``)."""
    sxi, sxa = model.suppression(*x)
    syi, sya = model.suppression(*y)
    li, la, gi, ga = model.generalization(x[0][:, None], x[1][:, None], y[0][None, :],
                                          y[1][None, :])
    d_icd, d_age, way = kernels.ags_table(sxi, sxa, syi, sya, gi, ga, model.alpha, model.beta)
    way = way.tolist()
    out_i: list[int] = []
    out_a: list[int] = []
    h, j = len(x[0]), len(y[0])
    while h > 0 or j > 0:
        step = way[h][j]
        if step == DIAG:
            out_i.append(int(li[h - 1, j - 1]))
            out_a.append(int(la[h - 1, j - 1]))
            h, j = h - 1, j - 1
        elif step == LEFT:
            j -= 1
        else:
            h -= 1
    return Alignment(np.array(out_i[::-1], dtype=np.int64), np.array(out_a[::-1], dtype=np.int64),
                     int(d_icd), int(d_age))


# ---------------------------------------------------------------------- A-GS, batch
def ags_costs(model: LossModel, x: Traj, batch: Batch) -> np.ndarray:
    """Weighted cost of A-GS(x, y) for every candidate y of ``batch`` (no traceback)."""
    m, width = len(x[0]), batch.icd.shape[0]
    sx = np.asarray(model.objective(*model.suppression(*x)), dtype=float)
    sy = np.asarray(model.objective(*model.suppression(batch.icd, batch.age)), dtype=float)
    if m and width:
        _, _, gi, ga = model.generalization(x[0][:, None, None], x[1][:, None, None],
                                            batch.icd[None], batch.age[None])
        gen = np.asarray(model.objective(gi, ga), dtype=float)
    else:
        gen = np.zeros((m, width, batch.icd.shape[1]))
    return scan_costs(gen, sx, sy, batch.lens)


def scan_costs(gen: np.ndarray, sx: np.ndarray, sy: np.ndarray, lens: np.ndarray,
               *, shifted: bool = False) -> np.ndarray:
    """The A-GS table, row by row, for a batch of candidates; returns D[m, len(y)].

    ``gen[h, j, c]``: cost of generalizing x_h with y_j of candidate c; ``sx[h]``, ``sy[j, c]``:
    suppression costs (0 for padding beyond a candidate's length).

    The table is kept shifted, E[h, j] = D[h, j] − S_j with S_j = sy_1 + … + sy_j, which
    turns the recurrence into E[h, j] = min(E[h−1, j−1] + gen − sy_j, E[h−1, j] + sx_h,
    E[h, j−1]): the last term is a running minimum, so each row is two vector additions,
    one minimum and one ``minimum.accumulate`` instead of a loop over j. With
    ``shifted=True`` the caller passes ``gen − sy`` already (a table lookup can absorb it).
    Sums are in floating point: costs match :func:`ags_align` up to rounding (≈1e-15).
    """
    width, count = sy.shape
    step = gen if shifted else gen - sy[None]
    # two rows and two scratch arrays reused across the loop (the same additions and minima
    # as allocating them per row, so the same bits; batches are small, allocation showed)
    row, nxt = np.zeros((width + 1, count)), np.empty((width + 1, count))
    diag, up = np.empty((width, count)), np.empty((width, count))
    for h, s in enumerate(np.asarray(sx, dtype=float).tolist()):
        np.add(row[0], s, out=nxt[0])
        if width:
            np.add(row[:-1], step[h], out=diag)
            np.add(row[1:], s, out=up)
            np.minimum(diag, up, out=nxt[1:])
        np.minimum.accumulate(nxt, axis=0, out=nxt)
        row, nxt = nxt, row
    cols = np.arange(count)
    return row[lens, cols] + np.concatenate([np.zeros((1, count)),
                                             np.cumsum(sy, axis=0)])[lens, cols]


# ---------------------------------------------------------------------- Baseline
def baseline_align(model: LossModel, x: Traj, y: Traj) -> Alignment:
    """Thesis Algorithm 2: LCA of pairs with the same index, suppress the longer's tail."""
    s = min(len(x[0]), len(y[0]))
    li, la, gi, ga = model.generalization(x[0][:s], x[1][:s], y[0][:s], y[1][:s])
    sxi, sxa = model.suppression(x[0][s:], x[1][s:])
    syi, sya = model.suppression(y[0][s:], y[1][s:])
    return Alignment(li, la, int(gi.sum() + sxi.sum() + syi.sum()),
                     int(ga.sum() + sxa.sum() + sya.sum()))


def baseline_costs(model: LossModel, x: Traj, batch: Batch) -> np.ndarray:
    """Weighted cost of Baseline(x, y) for every candidate y of ``batch``."""
    m, width = len(x[0]), batch.icd.shape[0]
    s = np.minimum(batch.lens, m)
    pos = np.arange(width)[:, None]
    syi, sya = model.suppression(batch.icd, batch.age)
    tail = pos >= s[None, :]  # y's unmatched tail (padding has zero suppression cost)
    out_i = (syi * tail).sum(axis=0)
    out_a = (sya * tail).sum(axis=0)
    sxi, sxa = model.suppression(*x)
    cxi = np.concatenate([[0], np.cumsum(sxi)])
    cxa = np.concatenate([[0], np.cumsum(sxa)])
    out_i += cxi[m] - cxi[s]
    out_a += cxa[m] - cxa[s]
    k = min(m, width)
    if k:
        _, _, gi, ga = model.generalization(x[0][:k, None], x[1][:k, None], batch.icd[:k],
                                            batch.age[:k])
        head = pos[:k] < s[None, :]
        out_i += (gi * head).sum(axis=0)
        out_a += (ga * head).sum(axis=0)
    return np.asarray(model.objective(out_i, out_a), dtype=float)
