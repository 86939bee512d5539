"""Utility measures of (k, k^m) releases: the uniform-assumption estimator, ARE and UL."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ehr_release.configuration.constraints import rt_data
from ehr_release.utility.artuc import (
    Estimator,
    Query,
    Release,
    additional_loss,
    are,
    record_ncp,
    record_ul,
    true_count,
    workloads,
)
from tests.kkm_release import to_files
from tests.test_artuc_worked_example import ROWS, release_line, worked_example


def _release(*lines: str) -> Release:
    """The release of these ``release_line`` texts, rows in the order given."""
    return Release.parse(to_files([json.loads(x) for x in lines]))


def test_estimator_follows_the_uniform_assumption() -> None:
    ds, cfg = worked_example()
    rel = _release(release_line("A", [20, 29], "Europe", "All",
                                [["053.20", "053.71"], ["494.1"]]))
    est = Estimator(rel, cfg, rt_data(ds, cfg))
    assert est.count(Query((("age", 25.0),), ())) == pytest.approx(1 / 10)   # 10 integers
    assert est.count(Query((("origin", "France"),), ())) == pytest.approx(1 / 5)  # 5 leaves
    assert est.count(Query((("origin", "Ghana"),), ())) == 0
    assert est.count(Query((("gender", "Male"),), ())) == pytest.approx(1 / 2)
    assert est.count(Query((), ("053.20",))) == pytest.approx(2 / 3)   # {a}, {a,b} of 3
    assert est.count(Query((), ("053.20", "053.71"))) == pytest.approx(1 / 3)  # {a,b} of 3
    assert est.count(Query((), ("053.20", "494.1"))) == pytest.approx(2 / 3)
    assert est.count(Query((), ("493.2",))) == 0


def test_an_unchanged_release_answers_exactly() -> None:
    ds, cfg = worked_example()
    data = rt_data(ds, cfg)
    exact = _release(*[release_line("A", [age, age], origin, gender,
                                    [[c] for c in sorted(codes.split())])
                       for age, origin, gender, codes in ROWS])
    queries = workloads(data, cfg, np.random.default_rng(3), n=20)
    truth = {w: [true_count(q, data) for q in qs] for w, qs in queries.items()}
    assert all(t >= 1 for ts in truth.values() for t in ts)
    assert are(exact, cfg, data, queries, truth) == {"W1": 0.0, "W2": 0.0, "W3": 0.0}
    assert record_ncp(exact, cfg).sum() == 0
    assert record_ul(exact).sum() == 0


def test_ul_split_and_additional_loss() -> None:
    rel = _release(release_line("A", [19, 30], "Europe", "All", [["053.20", "053.71"]]))
    assert record_ul(rel)[0] == pytest.approx(1.0)
    assert additional_loss({"NCP": 0.6, "UL": 0.2}, {"NCP": 0.5, "UL": 0.4}) == pytest.approx(
        50 * (0.2 - 0.5))
    assert additional_loss({"NCP": 0.6, "UL": 0.2}, {"NCP": 0.0, "UL": 0.4}) is None


def test_records_share_one_list_per_generalized_code_and_answers_do_not_depend_on_it() -> None:
    """Parsing shares lists across records (memory at scale); a release built with a list per
    record must give the same estimates, so sharing cannot leak into the figures."""
    ds, cfg = worked_example()
    data = rt_data(ds, cfg)
    lines = [release_line("A", [19, 30], "Europe", "All", [["053.20", "053.71"], ["494.1"]]),
             release_line("A", [19, 30], "Europe", "All", [["053.20", "053.71"], ["493.2"]]),
             release_line("B", [44, 51], "All", "All", [["458.1", "458.21"], ["494.1"]])]
    shared = _release(*lines)
    assert shared.codes[0][0] is shared.codes[1][0]
    assert shared.codes[0][1] is shared.codes[2][1]
    apart = Release(shared.demographics, [[list(g) for g in r] for r in shared.codes])
    queries = [Query((), ("053.20",)), Query((), ("053.20", "053.71")),
               Query((), ("053.20", "494.1")), Query((), ("494.1", "458.21")),
               Query((("gender", "Male"),), ("494.1",))]
    mine, theirs = Estimator(shared, cfg, data), Estimator(apart, cfg, data)
    assert [mine.count(q) for q in queries] == [theirs.count(q) for q in queries]
    assert mine.count(Query((), ("053.20", "053.71"))) == pytest.approx(2 / 3)
