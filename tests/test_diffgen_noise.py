"""Issue 32, finding 4: DiffGen's noise check is two-sided.

On a real Adult ε = 1 release four hand-made count columns passed the verifier, which only
counted residuals of 0: counts = true + 1 (every count exact), true ± 1, honest noise with
every odd residual pushed away from 0 (each count's parity published), and honest residuals
divided by 4. Each must now fail "counts noisy"; honest releases and honest simulated noise
must not.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.model.reports import WITHHELD_FAILED
from tests.test_diffgen_counts_check import true_counts

SCALE_ADULT = 52 / 31  # the final counts' scale of an Adult ε = 1, h = 10 release


@pytest.fixture(scope="module")
def adult_release():
    from ehr_release.configuration.taxonomies.adult import read_adult
    from tests.conftest import SHARED_DATA

    if not (SHARED_DATA / "adult" / "adult.data").exists():
        pytest.skip("shared Adult data not found")
    adult = read_adult(SHARED_DATA / "adult")
    entry = registry.get("diffgen")
    params = entry.parse({"epsilon": "1", "h": "10", "taxonomies": "adult", "eval_runs": "0"})
    files = entry.anonymize(adult, params, np.random.default_rng(0))
    return files, adult, params, true_counts(files, adult, params).to_numpy()


def _residual(released: np.ndarray, true: np.ndarray) -> np.ndarray:
    return released - true


def _plus_one(count, true, rng):
    return true + 1


def _plus_minus_one(count, true, rng):
    return np.maximum(true + rng.choice([-1, 1], size=len(true)), 0)


def _parity(count, true, rng):
    """Honest noise, every odd residual pushed one further from 0 (a count's parity then
    tells its true count's)."""
    r = count - true
    return np.maximum(true + r + np.where(r % 2 == 1, np.sign(r), 0), 0)


def _quarter(count, true, rng):
    """Honest residuals divided by 4, rounded away from 0: a residual of 0 stays 0, so the
    share of exact counts is the honest one (the small-residual test cannot see it), but
    the noise is a quarter of what was declared."""
    r = count - true
    return true + (np.sign(r) * np.ceil(np.abs(r) / 4)).astype(np.int64)


ATTACKS = {"true + 1": _plus_one, "true ± 1": _plus_minus_one,
           "odd residuals pushed from 0": _parity, "residuals ÷ 4": _quarter}


def test_the_honest_adult_release_holds(adult_release) -> None:
    files, adult, params, _ = adult_release
    report = registry.get("diffgen").verify(files, adult, params)
    assert report.holds, [(r.name, r.measured) for r in report.failures]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_manipulated_adult_release_fails(adult_release, attack) -> None:
    files, adult, params, true = adult_release
    groups = pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str, keep_default_na=False)
    count = groups["count"].astype(np.int64).to_numpy()
    forged = ATTACKS[attack](count, true, np.random.default_rng(7))
    assert (forged >= 0).all() and not np.array_equal(forged, count)
    groups["count"] = forged.astype(str)
    release = {**files, "groups.csv": groups.to_csv(index=False).encode()}
    report = registry.get("diffgen").verify(release, adult, params)
    failed = {r.name: r for r in report.failures}
    assert set(failed) == {"counts noisy"}, [(r.name, r.measured) for r in report.failures]
    noisy = failed["counts noisy"]
    assert "depart from the declared discrete Laplace law" in noisy.measured
    assert noisy.stored().measured == WITHHELD_FAILED and noisy.stored().evidence == {}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_attack_is_caught_by_the_two_sided_tests_alone(adult_release, attack) -> None:
    """Not only by the small-residual test (which passed three of the four)."""
    from ehr_release.privacy.diffgen_counts import FALSE_ALARM
    from ehr_release.privacy.diffgen_noise import SHARES, noise_tests

    files, _, _, true = adult_release
    groups = pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str, keep_default_na=False)
    count = groups["count"].astype(np.int64).to_numpy()
    forged = ATTACKS[attack](count, true, np.random.default_rng(7))
    assert noise_tests(forged - true, true, SCALE_ADULT, FALSE_ALARM / SHARES).flagged
    assert not noise_tests(count - true, true, SCALE_ADULT, FALSE_ALARM / SHARES).flagged


@pytest.mark.parametrize("c", [0, 1, 3, 40, 10_000])
@pytest.mark.parametrize("scale", [0.4, SCALE_ADULT, 7.0])
def test_each_groups_law_is_the_clamped_discrete_laplace(c, scale) -> None:
    from ehr_release.privacy.diffgen_noise import _law, clip_bound

    alpha = math.exp(-1 / scale)
    bound = clip_bound(scale)
    law = _law(min(c, bound + 1), alpha, bound)
    assert math.isclose(law.pmf.sum(), 1.0, rel_tol=1e-12)
    rng = np.random.default_rng(c)
    z = rng.geometric(1 - alpha, 200_000) - rng.geometric(1 - alpha, 200_000)
    r = np.clip(np.maximum(z, -c), -bound, bound)
    for value in range(-min(c, 3), 4):
        want = float(law.pmf[law.values == value].sum())
        got = float(np.mean(r == value))
        assert abs(got - want) <= 5 * math.sqrt(want * (1 - want) / len(r)) + 1e-4


@pytest.mark.parametrize("n", [30, 300])
@pytest.mark.parametrize("scale", [0.8, SCALE_ADULT, 6.0])
def test_honest_noise_is_flagged_no_more_often_than_each_tests_budget(n, scale) -> None:
    """Calibration on 300 seeded honest draws: at a loose budget (0.05) each test flags at
    most about 5% of them (binomial slack), and at the verifier's budget none at all."""
    from ehr_release.privacy.diffgen_counts import FALSE_ALARM
    from ehr_release.privacy.diffgen_noise import SHARES, TESTS, noise_tests

    rng = np.random.default_rng(n + int(10 * scale))
    alpha = math.exp(-1 / scale)
    true = np.where(rng.random(n) < 0.8, 0, rng.geometric(0.03, n))  # Adult-like: most empty
    loose = dict.fromkeys(TESTS, 0)
    strict = 0
    draws = 300
    for _ in range(draws):
        z = rng.geometric(1 - alpha, n) - rng.geometric(1 - alpha, n)
        result = noise_tests(np.maximum(true + z, 0) - true, true, scale, 0.05)
        for name in result.departing:
            loose[name] += 1
        strict += any(p <= FALSE_ALARM / SHARES for p in result.p.values())
    slack = 0.05 * draws + 4 * math.sqrt(0.05 * 0.95 * draws)
    assert all(count <= slack for count in loose.values()), loose
    assert strict == 0


@given(st.lists(st.tuples(st.sampled_from([0.0, 1e-12, 0.03, 0.5, 0.97, 1.0]),
                          st.integers(1, 200)), min_size=1, max_size=20))
@settings(max_examples=60, deadline=None)
def test_the_poisson_binomial_is_the_convolution_of_each_binomials_own_pmf(laws) -> None:
    """One vectorized pmf call gives exactly what a call per binomial gave."""
    from scipy import stats

    from ehr_release.privacy.diffgen_noise import _poisson_binomial

    ps = np.array([p for p, _ in laws])
    weights = np.array([n for _, n in laws])
    want = np.ones(1)
    for p, n in laws:
        want = np.convolve(want, stats.binom.pmf(np.arange(n + 1), n, p))
    got = _poisson_binomial(ps, weights)
    assert len(got) == weights.sum() + 1
    np.testing.assert_array_equal(got, want)
