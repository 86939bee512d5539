"""The two DP mechanisms DiffGen uses, and where their randomness comes from.

* :class:`Laplace` -- ``count + Lap(Δ/ε)`` on integer counts. Sampled by OpenDP's discrete
  Laplace (exact integer arithmetic; no inverse-CDF on doubles, so none of the classic
  floating-point attacks). Δ = 1 for counts under add/remove-one neighbours; a vector of
  counts over *disjoint* records still has L1 sensitivity 1, which is parallel composition.
* :class:`Exponential` -- pick candidate ``i`` with probability ∝ ``w_i·exp(ε·u_i / (2Δu))``.
  Sampled as report-noisy-max with Gumbel noise of scale ``2Δu/ε`` (OpenDP
  ``make_noisy_max`` under zCDP, whose Gumbel variant *is* the exponential mechanism; the
  pure-DP variant uses exponential noise, i.e. permute-and-flip, a different distribution).
  Optional base weights ``w_i`` (sub-interval lengths of a numerical split) enter as
  ``u_i + scale·ln w_i``.

Scales are rounded *up* to the next double, so the privacy loss actually paid is never more
than the ε the ledger charges. Randomness: :class:`OpenDPNoise` (OS entropy inside OpenDP;
the production path) or :class:`SeededNoise` (numpy, reproducible) which only exists for
tests and is refused unless :func:`~ehr_release.core.randomness.test_mode` is on.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Protocol

import numpy as np

from ehr_release.core.errors import ParameterError
from ehr_release.core.randomness import test_mode


def _round_up(exact: Fraction) -> float:
    """The smallest double ≥ ``exact``."""
    value = float(exact)
    if Fraction(value) < exact:
        value = math.nextafter(value, math.inf)
    return value


def class_count_sensitivity(n_classes: int) -> Fraction:
    """An upper bound of log2(n_classes) as an exact fraction (InfoGain's Δu)."""
    if n_classes & (n_classes - 1) == 0:
        return Fraction(n_classes.bit_length() - 1)
    bound = math.nextafter(math.nextafter(math.log2(n_classes), math.inf), math.inf)
    return Fraction(bound)


@dataclass(frozen=True)
class Laplace:
    """Laplace mechanism on counts with sensitivity ``sensitivity`` at budget ``epsilon``.

    ``scale = Δ/ε`` (rounded up); ``privacy_loss(d_in) = d_in/scale``, at most ε when the
    inputs differ by ``d_in ≤ Δ``. ε must be positive: ε = 0 would need infinite noise.
    """

    epsilon: Fraction
    sensitivity: Fraction = Fraction(1)

    def __post_init__(self) -> None:
        if self.epsilon <= 0 or self.sensitivity <= 0:
            raise ValueError(f"Laplace needs ε > 0 and Δ > 0, got {self.epsilon}, "
                             f"{self.sensitivity}")

    @property
    def scale(self) -> float:
        return _round_up(self.sensitivity / self.epsilon)

    def privacy_loss(self, d_in: Fraction) -> Fraction:
        """ε actually paid when inputs differ by ``d_in`` in the counted quantity."""
        return Fraction(d_in) / Fraction(self.scale)


@dataclass(frozen=True)
class Exponential:
    """Exponential mechanism for scores of sensitivity ``sensitivity`` at ``epsilon``.

    ``scale = 2Δu/ε`` (rounded up); ``privacy_loss(d_in) = 2·d_in/scale`` (scores that may
    move in either direction between neighbours, hence the 2).
    """

    epsilon: Fraction
    sensitivity: Fraction = Fraction(1)

    def __post_init__(self) -> None:
        if self.epsilon <= 0 or self.sensitivity <= 0:
            raise ValueError(f"Exponential needs ε > 0 and Δu > 0, got {self.epsilon}, "
                             f"{self.sensitivity}")

    @property
    def scale(self) -> float:
        return _round_up(2 * self.sensitivity / self.epsilon)

    def privacy_loss(self, d_in: Fraction) -> Fraction:
        return 2 * Fraction(d_in) / Fraction(self.scale)


class NoiseSource(Protocol):
    """Where a run's DP randomness comes from."""

    name: str

    def laplace(self, counts: np.ndarray, scale: float) -> np.ndarray:
        """``counts`` (int64) plus independent discrete Laplace noise of ``scale``."""
        ...

    def exponential(self, scores: np.ndarray, scale: float) -> int:
        """Index ``i`` with probability ∝ ``exp(scores[i] / scale)`` (Gumbel-max)."""
        ...

    def uniform_index(self, n: int) -> int:
        """Uniform in ``range(n)``: the point inside a chosen split sub-interval."""
        ...


class OpenDPNoise:
    """Production noise: OpenDP samplers seeded from the operating system's entropy."""

    name = "opendp"

    def laplace(self, counts: np.ndarray, scale: float) -> np.ndarray:
        if len(counts) == 0:
            return np.zeros(0, dtype=np.int64)
        out = _opendp_laplace(scale)(np.ascontiguousarray(counts, dtype=np.int64))
        return np.asarray(out, dtype=np.int64)

    def exponential(self, scores: np.ndarray, scale: float) -> int:
        values = np.asarray(scores, dtype=float)
        if len(values) == 1:
            return 0
        if not np.isfinite(values).all():
            raise ValueError("exponential mechanism scores must be finite")
        return int(_opendp_gumbel_max(scale)(np.ascontiguousarray(values)))

    def uniform_index(self, n: int) -> int:
        return secrets.randbelow(n)


class _OpenDP:
    """The OpenDP constructors we use, imported lazily and without ``opendp.prelude``
    (which pulls in scikit-learn extras and costs seconds)."""

    def __init__(self) -> None:
        import opendp.domains as domains
        import opendp.measurements as measurements
        import opendp.measures as measures
        import opendp.metrics as metrics
        import opendp.mod as mod

        mod.enable_features("contrib")
        self.vector_domain = domains.vector_domain
        self.atom_domain = domains.atom_domain
        self.l1_distance = metrics.l1_distance
        self.linf_distance = metrics.linf_distance
        self.zero_concentrated_divergence = measures.zero_concentrated_divergence
        self.m = measurements


@cache
def _opendp() -> _OpenDP:
    return _OpenDP()


@cache
def _opendp_laplace(scale: float):
    dp = _opendp()
    meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")),
                             dp.l1_distance(T="i64"), scale=scale)
    # The measurement's own privacy map must agree with ours: ε = 1/scale at d_in = 1.
    if not math.isclose(meas.map(1), 1.0 / scale, rel_tol=1e-9):
        raise RuntimeError(f"OpenDP Laplace map {meas.map(1)} ≠ 1/scale for scale {scale}")
    return meas


@cache
def _opendp_gumbel_max(scale: float):
    dp = _opendp()
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float))
    meas = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=scale)
    # Gumbel noisy max is the exponential mechanism: ε = 2/scale per unit of score change,
    # which OpenDP reports in zCDP as ρ = ε²/8. Anything else means a different sampler.
    eps = 2.0 / scale
    if not math.isclose(meas.map(1.0), eps * eps / 8, rel_tol=1e-6):
        raise RuntimeError(f"OpenDP noisy max is not the Gumbel (exponential) mechanism: "
                           f"map {meas.map(1.0)} for scale {scale}")
    return meas


class SeededNoise:
    """Reproducible numpy noise for tests only (the same distributions, not secure)."""

    name = "seeded-numpy (test mode)"

    def __init__(self, rng: np.random.Generator) -> None:
        if not test_mode():
            raise ParameterError("seed", "is only accepted in test mode: differentially "
                                 "private noise is never seeded in production", "(set)")
        self._rng = rng

    def laplace(self, counts: np.ndarray, scale: float) -> np.ndarray:
        p = -math.expm1(-1.0 / scale)
        size = len(counts)
        noise = self._rng.geometric(p, size) - self._rng.geometric(p, size)
        return np.asarray(counts, dtype=np.int64) + noise

    def exponential(self, scores: np.ndarray, scale: float) -> int:
        values = np.asarray(scores, dtype=float)
        return int(np.argmax(values / scale + self._rng.gumbel(size=len(values))))

    def uniform_index(self, n: int) -> int:
        return int(self._rng.integers(n))


def noise_source(seed: int | None, rng: np.random.Generator | None = None) -> NoiseSource:
    """OpenDP noise, or -- with a seed, in test mode only -- reproducible numpy noise."""
    if seed is None:
        return OpenDPNoise()
    return SeededNoise(rng if rng is not None else np.random.default_rng(seed))
