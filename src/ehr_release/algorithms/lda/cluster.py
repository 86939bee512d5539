"""MDAV-style clustering of trajectories (thesis §IV.3.2, spec §2 decisions).

While at least k records remain: f = the most frequent remaining trajectory; r = the
remaining record farthest from f (largest alignment cost); a cluster starts at r and grows
by the k − 1 remaining records cheapest to align with its running representative,
re-aligning after each addition. Fewer than k records left over join, one by one, the
cluster whose representative is cheapest to align with. Every member publishes its
cluster's final representative. Ties go to the trajectory seen first in the input.

Searching all remaining trajectories at every step is ~10⁸ alignments for the thesis'
27,639 records, so the search is pruned without changing its answer:

* identical trajectories are aligned once (the search runs over distinct trajectories);
* nearest: a lower bound per candidate — each of its pairs costs at least its cheapest
  fate against the representative (suppression, or generalization with some representative
  pair counting both sides), and a representative longer than the candidate must drop its
  cheapest surplus pairs — computed for all candidates; then, in increasing bound order,
  for those whose bound is not above the best cost found, a tighter bound and, if that is
  not above it either, the exact A-GS cost, until the next bound exceeds the best cost.
  This loop runs in compiled code (:mod:`~ehr_release.algorithms.lda.kernels`, numba): in
  NumPy its hundreds of small array operations per search were per-call overhead;
* farthest: suppressing everything is one possible alignment, so its cost bounds the A-GS
  cost from above; candidates are tried in decreasing bound order, and exact costs to f are
  remembered while f stays the most frequent trajectory.

Baseline costs are cheap enough to compute exactly for every candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ehr_release.algorithms.lda import kernels
from ehr_release.algorithms.lda.align import (
    Alignment,
    Batch,
    ags_align,
    ags_costs,
    baseline_align,
    baseline_costs,
)
from ehr_release.algorithms.lda.model import LossModel, Traj
from ehr_release.core.errors import ParameterError

METHODS = ("ags", "baseline")
_TOL = 1e-9  # slack for bounds summed in a different order than the exact costs
_FIRST_BATCH = 8  # candidates aligned exactly before the bounds are tightened
_NEXT_BATCH = 64


@dataclass(frozen=True)
class Clustering:
    """Cluster of each record and each cluster's published representative."""

    cluster_of: np.ndarray
    representatives: list[Traj]
    stats: dict[str, int] = field(default_factory=dict)


class _Pool:
    """Distinct trajectories, how many records of each remain, and their search data.

    Every (ICD, age) pair value occurring in the data gets an id; trajectories are also
    kept as padded value-id columns, so the cost of generalizing a representative pair
    with any candidate pair is a lookup in a (representative pairs × values) table.
    """

    def __init__(self, trajs: Sequence[Traj], model: LossModel) -> None:
        where: dict[tuple[bytes, bytes], int] = {}
        self.members: list[list[int]] = []
        self.trajs: list[Traj] = []
        for rec, (ti, ta) in enumerate(trajs):
            key = (ti.tobytes(), ta.tobytes())
            if key not in where:
                where[key] = len(self.trajs)
                self.trajs.append((ti, ta))
                self.members.append([])
            self.members[where[key]].append(rec)
        n = len(self.trajs)
        self.left = np.array([len(m) for m in self.members], dtype=np.int64)
        self.taken = [0] * n
        self.lens = np.array([len(t[0]) for t in self.trajs], dtype=np.int64)
        flat_i = np.concatenate([t[0] for t in self.trajs] + [np.empty(0, np.int64)])
        flat_a = np.concatenate([t[1] for t in self.trajs] + [np.empty(0, np.int64)])
        values, inverse = np.unique(np.stack([flat_i, flat_a]), axis=1, return_inverse=True)
        self.value_icd, self.value_age = values[0], values[1]
        self.padding = len(self.value_icd)  # value id of "no pair" (costs nothing)
        owner = np.repeat(np.arange(n), self.lens)
        starts = np.concatenate([[0], np.cumsum(self.lens)[:-1]]).astype(np.int64)
        self.vals = np.full((int(self.lens.max(initial=0)), n), self.padding, dtype=np.int64)
        self.vals[np.arange(len(owner)) - starts[owner], owner] = inverse.reshape(-1)
        # every trajectory's value ids, contiguous (the compiled search reads them)
        self.flat_all, self.starts_all = inverse.reshape(-1).astype(np.int32), starts
        self.icd_codes, code_index = np.unique(self.value_icd, return_inverse=True)
        self.age_nodes, age_index = np.unique(self.value_age, return_inverse=True)
        self.value_code_index = np.append(code_index.reshape(-1), 0)  # + padding
        self.value_age_index = np.append(age_index.reshape(-1), 0)
        self.sup_v = np.append(np.asarray(model.objective(
            *model.suppression(self.value_icd, self.value_age)), dtype=float), 0.0)
        self.sup = np.bincount(owner, weights=self.sup_v[inverse.reshape(-1)], minlength=n)
        self.far_order = np.lexsort((np.arange(n), -self.sup))
        self._alive = np.arange(n)

    def alive(self) -> np.ndarray:
        return self._alive

    def take(self, d: int) -> int:
        """One remaining record of distinct trajectory ``d`` (input order)."""
        rec = self.members[d][self.taken[d]]
        self.taken[d] += 1
        self.left[d] -= 1
        if not self.left[d]:
            self._alive = self._alive[self._alive != d]
        return rec

    def columns(self, ids: np.ndarray) -> np.ndarray:
        """Padded value ids (pairs × candidates) of ``ids``."""
        return np.take(self.vals[: int(self.lens[ids].max(initial=0))], ids, axis=1)

    def batch(self, ids: np.ndarray) -> Batch:
        cols = self.columns(ids)
        icd = np.append(self.value_icd, 0)[cols]
        age = np.append(self.value_age, 0)[cols]
        return Batch(icd, age, self.lens[ids])


@dataclass(frozen=True)
class _ValueCosts:
    """Costs of one representative x against the pool's codes, ages and pair values.

    Generalizing x_h with a value (code c, age a) costs x's side icd_x[h, c] + age_x[h, a]
    and the value's side icd_y[h, c] + age_y[h, a]; the compiled search reads these small
    tables (m × codes, m × ages) rather than an (m × values) one.
    """

    icd_x: np.ndarray
    age_x: np.ndarray
    icd_y: np.ndarray
    age_y: np.ndarray
    sup_x: np.ndarray  # (m,)
    y_min: np.ndarray  # (values + 1,): the value's cheapest own side against any x_h
    y_best: np.ndarray  # (values + 1,): the value's cheapest fate, both sides counted:
    #                     suppressed, or generalized with some x_h (≥ y_min)


class _Search:
    """Nearest / farthest distinct trajectory under one alignment method."""

    def __init__(self, pool: _Pool, model: LossModel, method: str) -> None:
        self.pool, self.model, self.method = pool, model, method
        self.exact_evaluations = 0
        self._far_of: int | None = None
        self._far_memo = np.empty(0)
        self._far_costs: _ValueCosts | None = None
        self._icd_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._age_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def value_costs(self, x: Traj) -> _ValueCosts:
        """Costs of ``x``'s pairs against the pool's codes and ages (one row per pair,
        remembered per tree node: representatives reuse few nodes), and per pair value the
        cheapest fates the bounds need."""
        model, pool = self.model, self.pool
        sup_x = np.asarray(model.objective(*model.suppression(*x)), dtype=float)
        m = len(x[0])
        icd_x, icd_y = self._rows(self._icd_rows, x[0], self._icd_row, pool.icd_codes, m)
        age_x, age_y = self._rows(self._age_rows, x[1], self._age_row, pool.age_nodes, m)
        y_min, y_best = kernels.value_bounds(icd_x, age_x, icd_y, age_y, pool.value_code_index,
                                             pool.value_age_index, pool.sup_v)
        return _ValueCosts(icd_x, age_x, icd_y, age_y, sup_x, y_min, y_best)

    @staticmethod
    def _rows(memo: dict[int, tuple[np.ndarray, np.ndarray]], nodes: np.ndarray,
              make: Callable[[int], tuple[np.ndarray, np.ndarray]], domain: np.ndarray,
              m: int) -> tuple[np.ndarray, np.ndarray]:
        if not m:
            return np.zeros((0, len(domain))), np.zeros((0, len(domain)))
        rows = []
        for node in nodes.tolist():
            if node not in memo:
                memo[node] = make(node)
            rows.append(memo[node])
        return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])

    def _icd_row(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """x's side and each code's side of generalizing ICD node ``node`` with the code."""
        model, codes = self.model, self.pool.icd_codes
        lci = model.icd_lc[model.icd.lca(np.array([node]), codes)]
        return (model.alpha * (lci - model.icd_lc[node]),
                model.alpha * (lci - model.icd_lc[codes]))

    def _age_row(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """x's side and each age's side of generalizing age node ``node`` with the age."""
        model, ages = self.model, self.pool.age_nodes
        la = model.age_lc(model.age.lca(np.array([node]), ages))
        return (model.beta * (la - model.age_lc(np.array([node]))),
                model.beta * (la - model.age_lc(ages)))

    def _tables(self, cv: _ValueCosts) -> tuple[np.ndarray, ...]:
        """The representative's and the pool's arrays every compiled cost reads."""
        pool = self.pool
        return (cv.icd_x, cv.age_x, cv.icd_y, cv.age_y, cv.sup_x, pool.value_code_index,
                pool.value_age_index, pool.sup_v)

    def exact(self, x: Traj, ids: np.ndarray, cv: _ValueCosts | None) -> np.ndarray:
        """Exact alignment costs of ``x`` with the distinct trajectories ``ids``."""
        self.exact_evaluations += len(ids)
        if self.method != "ags":
            return baseline_costs(self.model, x, self.pool.batch(ids))
        pool = self.pool
        return kernels.exact_costs(*self._tables(cv), pool.flat_all, pool.starts_all, pool.lens,
                                   np.asarray(ids, dtype=np.int64))

    # ------------------------------------------------------------------ nearest
    def nearest(self, rep: Traj) -> int:
        alive = self.pool.alive()
        if self.method != "ags":
            return int(alive[np.argmin(self.exact(rep, alive, None))])
        cv = self.value_costs(rep)
        pool = self.pool
        # in compiled code: quick bounds of all, exact costs of the _FIRST_BATCH lowest, then
        # the others whose quick bound does not exceed the best cost, one at a time in
        # increasing bound order — a tight bound, then the exact cost if the tight bound does
        # not exceed the best either; it stops at the first quick bound above the best. The
        # order among equal bounds does not matter: the answer is the least (cost, id) of
        # all that could win or tie.
        best_id, evaluated = kernels.nearest(
            alive, _FIRST_BATCH, _TOL, cv.y_best, self._surplus(cv), cv.y_min,
            *self._tables(cv), pool.flat_all, pool.starts_all, pool.lens)
        self.exact_evaluations += evaluated
        return int(best_id)

    @staticmethod
    def _surplus(cv: _ValueCosts) -> np.ndarray:
        """[i]: the representative's i cheapest suppressions summed."""
        return np.concatenate([[0.0], np.cumsum(np.sort(cv.sup_x))])

    def _quick_bounds(self, rep: Traj, cv: _ValueCosts, ids: np.ndarray) -> np.ndarray:
        """For the distinct trajectories ``ids``: each pair costs at least its cheapest fate
        (suppressed, or generalized with some representative pair, *both* sides counted);
        a longer representative also suppresses its cheapest surplus.

        Admissible: an alignment pays, for every candidate pair, its suppression or one
        generalization with both sides (each x_h in at most one of them), and suppresses
        the ≥ m − n representative pairs left unmatched — disjoint parts of its cost.
        Counting both sides at the price of one roughly doubles the bound against a raw
        trajectory, so far fewer candidates reach tight bounds and exact costs.
        """
        pool = self.pool
        return kernels.quick_bounds(cv.y_best, self._surplus(cv), len(rep[0]), pool.flat_all,
                                    pool.starts_all, pool.lens, np.asarray(ids, dtype=np.int64))

    def _tight_bounds(self, rep: Traj, cv: _ValueCosts, ids: np.ndarray) -> np.ndarray:
        """A tighter bound for a few candidates, counting both sides of every match.

        Any alignment matches M ≤ min(m, n) pairs. Candidate side: each pair costs ≥ its
        cheapest own-side generalization, and ≥ n − m of them are suppressed instead (add
        the smallest differences). Representative side: each pair costs ≥ the cheaper of
        suppression and its cheapest generalization with one of the candidate's pairs, and
        ≥ m − n of them are suppressed. (The nearest search computes it candidate by
        candidate inside :func:`kernels.pruned_nearest`.)
        """
        pool = self.pool
        return kernels.tight_bounds(cv.icd_x, cv.age_x, cv.y_min, cv.sup_x,
                                    pool.value_code_index, pool.value_age_index, pool.sup_v,
                                    pool.flat_all, pool.starts_all, pool.lens,
                                    np.asarray(ids, dtype=np.int64))

    # ------------------------------------------------------------------ farthest
    def farthest(self, f: int) -> int:
        pool = self.pool
        x = pool.trajs[f]
        if self.method != "ags":
            alive = pool.alive()
            return int(alive[np.argmax(self.exact(x, alive, None))])
        if self._far_of != f:
            # exact costs to f by distinct trajectory, NaN until computed
            self._far_of, self._far_memo = f, np.full(len(pool.trajs), np.nan)
            self._far_costs = self.value_costs(x)
        memo = self._far_memo
        order = pool.far_order[pool.left[pool.far_order] > 0]
        upper = pool.sup[f] + pool.sup[order]
        best_cost, best_id = -np.inf, -1
        start, size = 0, _NEXT_BATCH
        while start < len(order) and upper[start] >= best_cost - _TOL:
            chunk = order[start:start + size]
            chunk = chunk[upper[start:start + size] >= best_cost - _TOL]
            todo = chunk[np.isnan(memo[chunk])]
            if len(todo):
                memo[todo] = self.exact(x, todo, self._far_costs)
            if len(chunk):  # the chunk's largest cost, ties to the smallest id
                top = np.lexsort((chunk, -memo[chunk]))[0]
                c, d = float(memo[chunk[top]]), int(chunk[top])
                if c > best_cost or (c == best_cost and d < best_id):
                    best_cost, best_id = c, d
            start += size
            size *= 2
        return best_id


def cluster_trajectories(trajs: Sequence[Traj], k: int, model: LossModel,
                         method: str = "ags") -> Clustering:
    """Group ``trajs`` into clusters of ≥ k records, each published as one representative.

    Parameters
    ----------
    trajs
        One trajectory per record, as (ICD node ids, age node ids) of the model's trees.
    k
        Minimum cluster size.
    model
        Trees, weights and leaf convention.
    method
        ``"ags"`` (A-GS alignment, LDA) or ``"baseline"`` (index-wise alignment).

    Raises
    ------
    ParameterError
        If ``k`` < 2 or there are fewer than k records, or ``method`` is unknown.
    """
    if method not in METHODS:
        raise ParameterError("method", f"must be one of {', '.join(METHODS)}", method)
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise ParameterError("k", "must be an integer ≥ 2", k)
    if len(trajs) < k:
        raise ParameterError("k", f"must not exceed the number of records ({len(trajs)})", k)
    align: Callable[[LossModel, Traj, Traj], Alignment] = \
        ags_align if method == "ags" else baseline_align
    pool = _Pool(trajs, model)
    search = _Search(pool, model, method)
    cluster_of = np.full(len(trajs), -1, dtype=np.int64)
    reps: list[Traj] = []
    remaining = len(trajs)
    while remaining >= k:
        f = int(np.argmax(pool.left))
        d = search.farthest(f)
        members = [pool.take(d)]
        rep = pool.trajs[d]
        for _ in range(k - 1):
            d = search.nearest(rep)
            members.append(pool.take(d))
            out = align(model, rep, pool.trajs[d])
            rep = (out.icd, out.age)
        cluster_of[members] = len(reps)
        reps.append(rep)
        remaining -= k
    for rec in np.flatnonzero(cluster_of < 0).tolist():  # leftovers, fewer than k
        target = _cheapest_cluster(model, method, trajs[rec], reps)
        out = align(model, reps[target], trajs[rec])
        reps[target] = (out.icd, out.age)
        cluster_of[rec] = target
    return Clustering(cluster_of, reps, {"distinct": len(pool.trajs),
                                         "exact_alignments": search.exact_evaluations})


def _cheapest_cluster(model: LossModel, method: str, traj: Traj, reps: list[Traj]) -> int:
    costs_fn = ags_costs if method == "ags" else baseline_costs
    return int(np.argmin(costs_fn(model, traj, Batch.of(reps, model))))  # cost is symmetric
