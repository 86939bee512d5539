"""The DiffGen attack audit: exact counts and data-dependent orders are found; honest
releases pass (issue 14)."""

from __future__ import annotations

import ast
import io
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ehr_release.privacy.attacks import diffgen as attack_module
from ehr_release.privacy.attacks.diffgen import attack
from ehr_release.utility.diffgen import below_baseline
from tests.test_diffgen_counts_check import PREDICTORS, make_release, true_counts

FORBIDDEN = ("ehr_release.algorithms", "ehr_release.privacy.disassociation",
             "ehr_release.privacy.kkm", "ehr_release.privacy.gccens", "ehr_release.privacy.lda",
             "ehr_release.privacy.diffgen", "ehr_release.privacy.itemset_counts",
             "ehr_release.privacy.json_lines")


def _groups(files):
    return pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str, keep_default_na=False)


def _with_groups(files, frame):
    return {**files, "groups.csv": frame.to_csv(index=False).encode()}


def _exact(files, data, params):
    frame = _groups(files)
    frame["count"] = true_counts(files, data, params).astype(str)
    return _with_groups(files, frame)


def _swap_first_groups(files, n_classes: int = 2):
    frame = _groups(files)
    order = [*range(n_classes, 2 * n_classes), *range(n_classes), *range(2 * n_classes,
                                                                         len(frame))]
    return _with_groups(files, frame.iloc[order])


@pytest.fixture(scope="module")
def release():
    return make_release(n=600, predictors=f"{PREDICTORS},codes", h=6)


def test_an_honest_release_passes(release) -> None:
    files, data, params = release
    report = attack(files, data, params)
    assert report.passed, report.measured
    assert report.smallest_candidate_set is None and report.threshold == 0
    assert "counts exact, mechanism allows ≤" in report.measured


def test_exact_counts_fail(release) -> None:
    files, data, params = release
    report = attack(_exact(files, data, params), data, params)
    assert not report.passed
    assert "more counts equal their true count" in report.measured


def test_rows_sorted_by_count_fail(release) -> None:
    files, data, params = release
    frame = _groups(files)
    key = frame.groupby([c for c in frame.columns if c not in ("count", "in_hospital_death")],
                        sort=False)["count"].transform(lambda s: s.astype(int).sum())
    by_count = frame.assign(_k=key).sort_values("_k", kind="stable").drop(columns="_k")
    assert not attack(_with_groups(files, by_count), data, params).passed


def test_classes_in_data_order_fail(release) -> None:
    files, data, params = release
    frame = _groups(files)
    flipped = frame.iloc[[i ^ 1 for i in range(len(frame))]]
    assert not attack(_with_groups(files, flipped), data, params).passed


def test_the_report_carries_no_value(release) -> None:
    files, data, params = release
    report = attack(_swap_first_groups(files), data, params)
    text = report.measured + report.attacker_model + report.required
    labels = {v for c in _groups(files).columns for v in _groups(files)[c].unique()
              if not v.isdigit()}
    assert not any(label in text for label in labels if len(label) > 2)


def test_the_attack_imports_neither_algorithm_nor_verifier() -> None:
    tree = ast.parse(Path(attack_module.__file__).read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m == f or m.startswith(f + ".") for m in modules for f in FORBIDDEN)


def test_below_baseline_when_ca_is_below_la() -> None:
    truth = pd.DataFrame({"y": ["0"] * 6 + ["1"] * 4})
    low = {"CA (%) mean of 3": 53.9, "LA (%) mean of 3": 60.0}
    assert below_baseline(low, truth, "y", 3)
    assert not below_baseline({**low, "CA (%) mean of 3": 61.0}, truth, "y", 3)
    assert below_baseline({"in-release accuracy (%)": 55.0}, truth, "y", 0)
    assert not below_baseline({"in-release accuracy (%)": 65.0}, truth, "y", 0)


# --------------------------------------------------------------------------- properties
_releases = st.tuples(st.integers(40, 200), st.integers(0, 10_000), st.integers(1, 6),
                      st.sampled_from(["0.5", "1", "2"]), st.booleans())


def _random_release(case):
    n, seed, h, eps, codes = case
    return make_release(n=n, seed=seed, h=h, epsilon=eps,
                        predictors=f"{PREDICTORS},codes" if codes else PREDICTORS)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_releases)
def test_the_attack_never_fails_an_honest_release(case) -> None:
    files, data, params = _random_release(case)
    report = attack(files, data, params)
    assert report.passed, report.measured


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_releases)
def test_the_attack_finds_a_planted_order(case) -> None:
    files, data, params = _random_release(case)
    assume(len(_groups(files)) >= 4)
    assert not attack(_swap_first_groups(files), data, params).passed


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_releases)
def test_the_attack_finds_exact_counts_whenever_the_noise_law_can(case) -> None:
    """Exact counts are flagged whenever all-exact has probability ≤ 1e-6 under the
    mechanism (below that, no test at that false-alarm rate can tell them apart)."""
    files, data, params = _random_release(case)
    true = true_counts(files, data, params).to_numpy()
    final = json.loads(files["ledger.json"])["charges"][-1]
    p0 = np.tanh(float(Fraction(final["epsilon"])) / 2)  # P(exact) of a non-empty group
    log_all_exact = (true > 0).sum() * np.log(p0) + (true == 0).sum() * np.log((1 + p0) / 2)
    assume(log_all_exact <= np.log(1e-6))
    assert not attack(_exact(files, data, params), data, params).passed
