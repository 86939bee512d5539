"""Issue 34 finding 7: utility reads in words with a scale per measure, shares as
percentages, and measures on different scales never share a chart axis.

The words come from one registry (:mod:`ehr_release.documents.measures`) that the certificate, the
comparison report and the dashboard all read.
"""

from __future__ import annotations

import io

import pytest

from ehr_release import registry
from ehr_release.comparison.compare import Candidate, Outcome
from ehr_release.comparison.comparison_report import frontier_chart, frontier_panels
from ehr_release.dashboard.runview import utility_rows
from ehr_release.documents.measures import describe, explain, key_measures, measure, shown_value


def test_a_figure_reads_with_what_it_is_and_what_good_and_bad_look_like() -> None:
    line = describe("artuc", "ARE W3", 0.7779)
    assert line.startswith("ARE W3 0.7779 — average relative error")
    assert "on two codes" in line and "0 is exact" in line and "no better than" in line
    assert "lower is better" in line


@pytest.mark.parametrize(("algorithm", "name", "value", "shown"), [
    ("artuc", "records satisfying the utility constraints", 1.0, "100 %"),
    ("disassociation", "MRE within ±5% (share)", 0.925, "92.5 %"),
    ("gccens", "CUL mean", 0.125, "12.5 %"),
    ("gccens", "share below k after", 0.0, "0 %"),
    ("diffgen", "CA (%) mean of 2", 81.25, "81.25 %"),
    ("artuc", "ARE W2", 1.348, "1.348"),
])
def test_shares_are_printed_as_percentages(algorithm: str, name: str, value: float,
                                           shown: str) -> None:
    assert shown_value(algorithm, name, value) == shown


def test_the_same_name_means_what_its_family_measures() -> None:
    assert "two codes" in explain("artuc", "ARE W3")
    assert "random code sets" in explain("disassociation", "ARE W2 (estimator)")
    assert "one demographic" in explain("rmr", "ARE W2")


def test_every_headline_and_key_measure_is_registered() -> None:
    """Each registered algorithm's ranking measure has words and a direction (lower)."""
    for name in registry.names():
        headline = registry.get(name).headline_loss
        if headline is None:
            continue
        m = measure(name, headline)
        assert m is not None and m.better == "lower" and m.scale, (name, headline)


def test_the_documents_read_the_registry() -> None:
    assert key_measures("artuc", {"NCP": 0.1, "ARE W3": 0.2, "UL": 0.3, "records": 1.0},
                        "ARE W3") == ["ARE W3", "NCP", "UL"]


def test_the_dashboard_explains_every_figure_it_shows() -> None:
    rows = utility_rows({"algorithm": "disassociation", "metrics": {
        "MRE median % (one record per item code)": -372.8,
        "MRE within ±5% (share)": 0.5}})
    assert rows[0][1] == "-372.8 %" and "matches invented" in rows[0][2]
    assert rows[1][1] == "50 %" and "higher is better" in rows[1][2]
    assert utility_rows(None) == []


def _outcome(i: int, algorithm: str, metric: str, loss: float, k: int) -> Outcome:
    return Outcome(Candidate(i, algorithm, {"k": str(k)}), True, metric, loss)


def test_compare_never_puts_two_measures_on_one_axis() -> None:
    """ARE W2 and ARE W3 (or an ARE and a CUL) get panels of their own."""
    outcomes = [_outcome(1, "artuc", "ARE W3", 2.5, 5), _outcome(2, "artuc", "ARE W3", 2.9, 10),
                _outcome(3, "disassociation", "ARE W2 (estimator)", 0.3, 5),
                _outcome(4, "gccens", "CUL mean", 0.01, 5)]
    panels = frontier_panels(outcomes, "k")
    assert set(panels) == {"ARE W3", "ARE W2 (estimator)", "CUL mean"}
    assert panels["ARE W3"] == {"artuc": [(5.0, 2.5, True), (10.0, 2.9, True)]}
    png = frontier_chart(outcomes, "k")
    assert png is not None
    from PIL import Image

    width, height = Image.open(io.BytesIO(png)).size
    assert height > width  # three stacked panels, not one
