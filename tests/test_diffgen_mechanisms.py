"""Statistical and exact tests of DiffGen's mechanisms and of its ledger.

OpenDP cannot be seeded, so its samplers are tested with tolerances of about five standard
errors: they fail for a wrong scale or a wrong selection law, and only about once in a
million runs by chance. The test-only numpy sampler is tested the same way with a fixed seed.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from ehr_release.algorithms.diffgen.ledger import PARALLEL, SEQUENTIAL, BudgetExceeded, Ledger
from ehr_release.algorithms.diffgen.noise import (
    Exponential,
    Laplace,
    OpenDPNoise,
    SeededNoise,
    class_count_sensitivity,
    noise_source,
)
from ehr_release.algorithms.diffgen.splits import choose_split, split_candidates
from ehr_release.configuration.taxonomies import NumericalDomain
from ehr_release.core.errors import ParameterError

SOURCES = [pytest.param(lambda: OpenDPNoise(), id="opendp"),
           pytest.param(lambda: SeededNoise(np.random.default_rng(20130101)), id="seeded")]


def _discrete_laplace_law(scale: float) -> tuple[float, float]:
    """(P(X = 0), Var X) of the discrete Laplace with P(x) ∝ exp(-|x|/scale)."""
    a = math.exp(-1 / scale)
    return (1 - a) / (1 + a), 2 * a / (1 - a) ** 2


@pytest.mark.parametrize("make", SOURCES)
@pytest.mark.parametrize("scale", [2.0, 10.0])
def test_laplace_noise_has_the_charged_scale(make, scale) -> None:
    n = 40_000
    counts = np.full(n, 100, dtype=np.int64)
    noise = make().laplace(counts, scale) - 100
    assert noise.dtype == np.int64
    p0, var = _discrete_laplace_law(scale)
    assert abs(noise.mean()) < 5 * math.sqrt(var / n)
    # the sample variance of a Laplace-like law has std ≈ var·sqrt(5/n) (kurtosis 6)
    assert abs(noise.var() - var) < 5 * var * math.sqrt(5 / n)
    assert abs((noise == 0).mean() - p0) < 5 * math.sqrt(p0 * (1 - p0) / n)


@pytest.mark.parametrize("make", SOURCES)
def test_exponential_mechanism_selects_with_em_probabilities(make) -> None:
    scores = np.array([0.0, 1.0, 2.0, 2.0])
    scale = 1.0
    n = 12_000
    source = make()
    picks = np.bincount([source.exponential(scores, scale) for _ in range(n)], minlength=4)
    expected = np.exp(scores / scale) / np.exp(scores / scale).sum()
    se = np.sqrt(expected * (1 - expected) / n)
    assert np.all(np.abs(picks / n - expected) < 5 * se), (picks / n, expected)
    # Permute-and-flip (OpenDP's pure-DP noisy max) gives the lowest score ≈ 0.041 instead
    # of 0.054 -- six standard errors away: the test tells the two selection laws apart.


@pytest.mark.parametrize("make", SOURCES)
def test_split_points_follow_length_weighted_exponential_law(make) -> None:
    dom = NumericalDomain(0, 10, integer=True)
    values = np.array([2.0, 2.0, 6.0])
    classes = np.array([0, 0, 1])
    cands = split_candidates(values, classes, 2, 0, 10, dom)
    # groups of split points: {1,2} (left empty), {3..6} (left = the two 2s), {7..9}
    assert cands.size.tolist() == [2, 4, 3]
    mech = Exponential(Fraction(1), Fraction(1))  # scale 2
    scores = np.array([2.0, 3.0, 2.0])  # Max with left = ∅ | {2, 2} | {2, 2, 6}
    source = make()
    n = 6_000
    points = np.array([choose_split(cands, "max", mech, source, dom)[0] for _ in range(n)])
    assert points.min() >= 1 and points.max() <= 9 and np.all(points == np.round(points))
    weights = cands.size * np.exp(scores / mech.scale)
    expected = weights / weights.sum()
    observed = np.array([np.isin(points, [1, 2]).mean(), np.isin(points, range(3, 7)).mean(),
                         np.isin(points, [7, 8, 9]).mean()])
    se = np.sqrt(expected * (1 - expected) / n)
    assert np.all(np.abs(observed - expected) < 5 * se), (observed, expected)
    # inside the chosen sub-interval every point is equally likely
    middle = points[(points >= 3) & (points <= 6)]
    per_point = np.bincount(middle.astype(int), minlength=7)[3:7] / len(middle)
    assert np.all(np.abs(per_point - 0.25) < 5 * math.sqrt(0.25 * 0.75 / len(middle)))


def test_scales_are_rounded_up_so_the_loss_never_exceeds_the_charge() -> None:
    for eps in (Fraction(1, 52), Fraction(1, 3), Fraction(7, 10), Fraction(1, 10**9)):
        lap, em = Laplace(eps), Exponential(eps, Fraction(1))
        assert Fraction(lap.scale) >= 1 / eps and lap.privacy_loss(1) <= eps
        assert Fraction(em.scale) >= 2 / eps and em.privacy_loss(1) <= eps
    assert Laplace(Fraction(1, 10)).scale == 10.0
    assert Exponential(Fraction(1, 10)).scale == 20.0


def test_infogain_sensitivity_bounds_log2_of_the_class_count() -> None:
    assert class_count_sensitivity(2) == 1 and class_count_sensitivity(4) == 2
    assert float(class_count_sensitivity(3)) >= math.log2(3)
    assert float(class_count_sensitivity(3)) - math.log2(3) < 1e-12


@pytest.mark.parametrize("bad", [Fraction(0), Fraction(-1)])
def test_mechanisms_refuse_a_non_positive_budget(bad) -> None:
    with pytest.raises(ValueError):
        Laplace(bad)
    with pytest.raises(ValueError):
        Exponential(bad)


def test_ledger_composes_sequentially_and_in_parallel_and_refuses_overdraft() -> None:
    ledger = Ledger(Fraction(1))
    third = Fraction(1, 3)
    ledger.charge(Exponential(third), step=1, phase="selection", scope=SEQUENTIAL,
                  touched="all")
    for side in ("left", "right"):
        ledger.charge(Exponential(third), step=1, phase="split", scope=PARALLEL,
                      group="step 1", touched=side)
    assert ledger.spent() == Fraction(2, 3)  # the two parallel charges cost one third
    with pytest.raises(BudgetExceeded):
        ledger.charge(Laplace(Fraction(1, 2)), step=2, phase="final-counts",
                      scope=PARALLEL, group="final", touched="all")
    assert ledger.spent() == Fraction(2, 3) and len(ledger.charges) == 3
    ledger.charge(Laplace(ledger.remaining()), step=2, phase="final-counts",
                  scope=PARALLEL, group="final", touched="all")
    assert ledger.spent() == 1
    with pytest.raises(ValueError):
        ledger.charge(Laplace(third), step=3, phase="x", scope=PARALLEL, touched="no group")


def test_a_seed_for_dp_noise_is_refused_outside_test_mode(monkeypatch) -> None:
    monkeypatch.setenv("EHR_RELEASE_TEST_MODE", "0")
    with pytest.raises(ParameterError, match="test mode"):
        noise_source(3)
    assert isinstance(noise_source(None), OpenDPNoise)
    from ehr_release import registry

    with pytest.raises(ParameterError, match="seed"):
        registry.get("diffgen").parse({"epsilon": "1", "h": "2", "taxonomies": "adult",
                                       "seed": "3"})
