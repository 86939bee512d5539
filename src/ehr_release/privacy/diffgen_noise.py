"""Two-sided tests that DiffGen's published counts carry the declared noise (issue 32, 4).

The small-residual test (:func:`.diffgen_counts.too_many_small`) counts residuals near 0 and
so catches exact counts, and nothing else: ``true + 1`` everywhere, ``true ± 1``, honest noise
with every odd residual pushed away from 0 (which publishes each count's parity), or honest
noise divided by 4 all passed it on a real Adult ε = 1 release. Here the whole law of the
residuals ``r = released − true`` is tested against the declared one.

**The null law, exactly.** ``released = max(true + Z, 0)`` with ``Z`` discrete Laplace of the
ledger's final scale ``s``: ``P(Z = z) = (1 − α)/(1 + α)·α^|z|``, ``α = exp(−1/s)``. A group of
true count ``c`` has ``r = max(Z, −c)``. Every statistic below reads the residual clipped to
``[−T, T]``, ``T = ⌈s·ln 10¹²⌉`` (data-independent); the clipped residual's law is a finite
pmf (the clipped tails are atoms at ±T), so each group's law is computed exactly, with no
truncation error, and groups of the same ``min(c, T + 1)`` share it.

**The tests** (:data:`TESTS`), each at its own false-alarm budget, the budgets summed by
Bonferroni to :data:`~.diffgen_counts.FALSE_ALARM` = 10⁻⁶ together with the small-residual
test (so 10⁻⁶/7 each):

* *fit*: the residuals binned at the integer deciles of the unclamped law (data-independent);
  every bin's count is a Poisson-binomial of the groups' exact bin probabilities, tested
  two-sided (``2·min`` of its exact tails), Bonferroni over the bins — an exact multinomial
  goodness-of-fit test of max type;
* *mean*: ``Σ r`` two-sided, by the Chernoff bound ``P(S ≥ x) ≤ min_t E e^{t(S − x)}`` from
  the groups' exact moment generating functions (a bound, so the level holds exactly and the
  power is a little lower than an exact tail's);
* *variance*: ``Σ r²`` two-sided, by the same bound;
* *mod 2, mod 3, mod 4*: for every residue class ``j`` of ``r mod k``, the number of residuals
  in it is a Poisson-binomial, tested two-sided at the family's budget / ``k`` (one class for
  ``k = 2``, whose other class is its complement).

Every p-value is exact or an upper bound, so the false-alarm rate of an honest release is at
most the sum of the budgets whatever its size. Small releases have little power: the power by
release size is measured by ``bench/diffgen_noise_power.py`` and recorded in
``docs/reliability.md``. The outcome is counts and p-value bounds only: it names which tests
depart, never a count.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize, signal, stats

#: Every two-sided test of the residual law, in the order they are reported.
TESTS = ("fit", "mean", "variance", "mod 2", "mod 3", "mod 4")
#: Tests sharing the false-alarm budget by Bonferroni: these and the small-residual test.
SHARES = len(TESTS) + 1
_CLIP_DECADES = 12  # T = ⌈s·ln 10¹²⌉: a clipped tail is an atom of mass ≤ 10⁻¹²


@dataclass(frozen=True)
class _Law:
    """The exact pmf of one group's clipped residual (``values`` → ``pmf``)."""

    values: np.ndarray
    pmf: np.ndarray


def clip_bound(scale: float) -> int:
    """``T``: residuals are read clipped to [−T, T] (see the module docstring)."""
    return max(1, math.ceil(scale * _CLIP_DECADES * math.log(10)))


def _law(c: int, alpha: float, bound: int) -> _Law:
    """The law of ``clip(max(Z, −c), −T, T)`` for a group of true count ``c`` (c ≤ T + 1
    stands for every larger count: then the lower clip is at −T)."""
    low = -min(c, bound)
    z = np.arange(low, bound + 1)
    kappa = (1.0 - alpha) / (1.0 + alpha)
    pmf = kappa * alpha ** np.abs(z).astype(float)
    pmf[0] = alpha ** (-low) / (1.0 + alpha)  # P(Z ≤ low): clamped at −c, or clipped at −T
    pmf[-1] = alpha ** bound / (1.0 + alpha)  # P(Z ≥ T)
    return _Law(z, pmf)


@dataclass(frozen=True)
class NoiseTests:
    """p-value bounds of every test of :data:`TESTS` and whether each departs at its budget."""

    groups: int
    p: dict[str, float]
    budget: float

    @property
    def departing(self) -> list[str]:
        return [name for name in TESTS if self.p[name] <= self.budget]

    @property
    def flagged(self) -> bool:
        return bool(self.departing)

    def text(self) -> str:
        if self.flagged:
            return (f"the residuals depart from the declared discrete Laplace law in: "
                    f"{', '.join(self.departing)} (two-sided, each at false alarm "
                    f"{self.budget:.3g})")
        low = min(self.p.values())
        return (f"fit, mean, variance and residues mod 2, 3, 4 consistent with the declared "
                f"discrete Laplace law over {self.groups:,} groups (smallest p {low:.3g}, "
                f"each test at false alarm {self.budget:.3g})")


def _poisson_binomial(ps: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """pmf of Σ Bin(weights[i], ps[i]) (independent), exactly, by convolution.

    Every binomial's pmf comes from one vectorized ``binom.pmf`` call over all of them,
    cut apart at their lengths: the same values as a call per binomial, whose fixed cost
    (about 30 µs) was most of a release's noise tests (18 counts × one call per group size).
    """
    sizes = np.asarray(weights, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes + 1)])
    # each binomial's own 0..n, laid end to end
    successes = np.arange(starts[-1]) - np.repeat(starts[:-1], sizes + 1)
    parts = np.split(stats.binom.pmf(successes, np.repeat(sizes, sizes + 1),
                                     np.repeat(np.asarray(ps, dtype=float), sizes + 1)),
                     starts[1:-1])
    pmf = np.ones(1)
    for part in parts:
        pmf = (np.convolve(pmf, part) if len(pmf) * len(part) <= 4_000_000
               else np.clip(signal.fftconvolve(pmf, part), 0.0, None))
    return pmf


def _count_p(observed: int, ps: np.ndarray, weights: np.ndarray) -> float:
    """Two-sided p-value of a Poisson-binomial count: 2·min(P(X ≤ x), P(X ≥ x)), ≤ 1."""
    pmf = _poisson_binomial(ps, weights)
    below = float(pmf[: observed + 1].sum())
    above = float(pmf[observed:].sum())
    return min(1.0, 2.0 * min(below, above))


def _chernoff_p(observed: float, laws: list[_Law], weights: np.ndarray,
                g: Callable[[np.ndarray], np.ndarray]) -> float:
    """Two-sided bound on ``P(Σ g(r) as far from its mean as observed)`` by Chernoff:
    ``P(S ≥ x) ≤ exp(min_t Σ_i log E e^{t·g(r_i)} − t·x)``, t ≥ 0 (t ≤ 0 for the lower
    tail), doubled for the two sides. The laws are padded into one matrix (pmf 0 where a
    law has no value) so each evaluation is one ``logsumexp``."""
    width = max(len(law.values) for law in laws)
    values = np.zeros((len(laws), width))
    logs = np.full((len(laws), width), -np.inf)
    for i, law in enumerate(laws):
        values[i, : len(law.values)] = g(law.values.astype(float))
        logs[i, : len(law.values)] = np.log(np.maximum(law.pmf, 1e-300))
    pmf = np.exp(logs)
    means = (values * pmf).sum(axis=1)
    mean = float(np.dot(weights, means))
    var = float(np.dot(weights, (((values - means[:, None]) ** 2) * pmf).sum(axis=1)))
    if var <= 0 or observed == mean:
        return 1.0 if math.isclose(observed, mean) else 0.0

    def log_bound(t: float) -> float:
        # logsumexp by rows, written out: scipy's costs ~0.3 ms of checks per call, and the
        # search calls it about 20 times per test
        exponents = t * values + logs
        top = exponents.max(axis=1)  # > -inf: every law has a value of positive mass
        if not np.isfinite(top).all():  # t·g(r) overflowed: no bound at this t (as scipy)
            return math.inf
        sums = np.exp(exponents - top[:, None]).sum(axis=1)
        return float(np.dot(weights, top + np.log(sums))) - t * observed

    direction = 1.0 if observed > mean else -1.0
    span = float(np.max(np.abs(values))) or 1.0
    reach = max(50.0 / span, 10.0 * abs(observed - mean) / var)  # any t gives a bound
    best = optimize.minimize_scalar(lambda u: log_bound(direction * u), bounds=(0.0, reach),
                                    method="bounded", options={"xatol": 1e-9 * reach})
    return min(1.0, 2.0 * math.exp(min(0.0, float(best.fun))))


def _bins(alpha: float, bound: int) -> np.ndarray:
    """Upper edges of the fit test's bins: the integer deciles of the unclamped law."""
    z = np.arange(-bound, bound + 1)
    cdf = np.where(z < 0, alpha ** (-z.astype(float)) / (1 + alpha),
                   1 - alpha ** (z.astype(float) + 1) / (1 + alpha))
    edges = {int(z[np.searchsorted(cdf, q)]) for q in np.arange(1, 10) / 10}
    return np.array(sorted(edges | {bound}))


def noise_tests(residuals: np.ndarray, true: np.ndarray, scale: float,
                budget: float) -> NoiseTests:
    """Every test of :data:`TESTS` on ``released − true`` residuals (module docstring)."""
    residuals = np.asarray(residuals, dtype=np.int64)
    true = np.asarray(true, dtype=np.int64)
    if not scale > 0 or not math.isfinite(scale):
        raise ValueError(f"a noise scale must be a finite number > 0, got {scale}")
    if not len(residuals):  # nothing published, nothing to test
        return NoiseTests(0, dict.fromkeys(TESTS, 1.0), budget)
    alpha = math.exp(-1.0 / scale)
    bound = clip_bound(scale)
    cap = np.minimum(true, bound + 1)
    keys, weights = np.unique(cap, return_counts=True)
    laws = [_law(int(c), alpha, bound) for c in keys]
    r = np.clip(residuals, -bound, bound)
    p: dict[str, float] = {}

    def class_p(member: Callable[[np.ndarray], np.ndarray]) -> float:
        ps = np.array([float(law.pmf[member(law.values)].sum()) for law in laws])
        return _count_p(int(member(r).sum()), ps, weights)

    edges = _bins(alpha, bound)
    lowers = np.concatenate([[-bound - 1], edges[:-1]])
    p["fit"] = min(class_p(lambda v, lo=lo, hi=hi: (v > lo) & (v <= hi))
                   for lo, hi in zip(lowers, edges, strict=True)) * len(edges)
    p["mean"] = _chernoff_p(float(r.sum()), laws, weights, lambda v: v)
    p["variance"] = _chernoff_p(float((r.astype(float) ** 2).sum()), laws, weights,
                                lambda v: v ** 2)
    for k in (2, 3, 4):
        classes = range(1) if k == 2 else range(k)
        p[f"mod {k}"] = min(class_p(lambda v, j=j, k=k: v % k == j)
                            for j in classes) * len(classes)
    return NoiseTests(len(residuals), {name: min(1.0, value) for name, value in p.items()},
                      budget)
