"""A comparison's DiffGen candidates spend their extract's ε (storage/budget.py).

A comparison never recommends nor releases an ε-DP row, but the steward sees its utility,
measured on the true data from DP draws of that data, and may then pick ε and h for a
direct ``run``: a choice among draws of the same records, which composes. So each DP
candidate a comparison draws counts on the extract's account, and the site's total refuses,
before any draw, a comparison whose DP candidates it cannot pay for.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from ehr_release.planning.request import ComparisonRequest
from ehr_release.samples.sample import CLASS_COLUMN, generate_sample, write_sample
from ehr_release.storage import budget, runs, site_policy
from ehr_release.storage.audit import export_events, verify_chain
from ehr_release.storage.models import DatasetRecord

DIFFGEN = {"h": "2", "taxonomies": "mimic-demo", "eval_runs": "0",
           "predictors": "age,gender,codes", "m": "2"}


def _request(data, out, algorithms, grid) -> ComparisonRequest:
    return ComparisonRequest(comparison_id="cmp-" + "cd" * 16, input_path=str(data),
                             class_column=CLASS_COLUMN, algorithms=algorithms,
                             params=DIFFGEN, grid=grid, requester="steward",
                             out_dir=str(out))


@pytest.fixture
def sample(harness, ehr_home, tmp_path):
    return write_sample(generate_sample(60, seed=2), tmp_path / "patients.csv"), tmp_path / "out"


def _later_diffgen_run(fingerprint: str, epsilon: str) -> str:
    """A DiffGen run requested afterwards on the same extract (its own dataset row)."""
    ds = DatasetRecord(fingerprint=fingerprint, rows=60, codes=0, columns_json="{}",
                       source="x")
    return runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester="steward",
                           algorithm="diffgen",
                           parameters={"epsilon": epsilon, "h": "2",
                                       "taxonomies": "mimic-demo"}, out_dir="/tmp").id


def test_a_comparisons_diffgen_draws_count_and_its_other_rows_do_not(sample, monkeypatch):
    from ehr_release.flows.compare import compare_flow

    data, out = sample
    report = compare_flow(_request(data, out, ["diffgen", "disassociation"],
                                   {"k": ["2"], "epsilon": ["0.25", "0.5"]}))
    assert [r["candidate"]["algorithm"] for r in report["rows"]] == [
        "diffgen", "diffgen", "disassociation"]
    assert not report["rows"][0]["error"] and not report["rows"][1]["error"]
    events = export_events(None, "jsonl")
    assert events.count('"action":"comparison.drawn"') == 2 and verify_chain().ok
    assert events.count('"action":"epsilon.reserved"') == 1  # both, before the first draw
    later = _later_diffgen_run(report["dataset_fingerprint"], "1")
    spent = budget.account(later, budget.dp_algorithm_names())
    assert spent is not None
    assert (spent.compared, spent.compared_draws, spent.comparisons) == (Fraction(3, 4), 2, 1)
    assert "2 DP candidates of 1 comparison (0.75)" in spent.text()
    # 0.75 + 1 > 1.5: the run is refused
    site_policy.set_epsilon_total("1.5", actor="admin", reason="test")
    with pytest.raises(budget.EpsilonBudgetExhausted, match="exceed the ε budget"):
        budget.refuse_beyond_total(later, budget.dp_algorithm_names())


def test_a_comparison_without_dp_candidates_spends_nothing(sample) -> None:
    from ehr_release.flows.compare import compare_flow

    data, out = sample
    report = compare_flow(_request(data, out, ["disassociation"], {"k": ["2", "3"]}))
    assert len(report["rows"]) == 2
    assert "comparison.drawn" not in export_events(None, "jsonl")
    assert "epsilon.reserved" not in export_events(None, "jsonl")
    later = _later_diffgen_run(report["dataset_fingerprint"], "1")
    spent = budget.account(later, budget.dp_algorithm_names())
    assert spent is not None and (spent.compared, spent.compared_draws) == (0, 0)


def test_a_comparison_beyond_the_site_total_is_refused_before_any_draw(sample, monkeypatch):
    """Each DP candidate alone fits the total, together they do not: nothing runs at all
    (no partial comparison), and the refusal is an audit event."""
    from ehr_release.flows import compare

    data, out = sample
    drawn: list[object] = []
    monkeypatch.setattr(compare, "anonymize_as_released",
                        lambda *a, **k: drawn.append(a) or {})
    site_policy.set_epsilon_total("1", actor="admin", reason="test")
    request = _request(data, out, ["disassociation", "diffgen"],
                       {"k": ["2"], "epsilon": ["0.5", "0.75"]})
    with pytest.raises(budget.EpsilonBudgetExhausted,
                       match=r"comparison would exceed .*site total ε = 1 per patient"):
        compare.compare_flow(request)
    assert drawn == [] and not request.folder.exists()
    events = export_events(None, "jsonl")
    assert '"action":"comparison.refused"' in events and verify_chain().ok
    assert "comparison.drawn" not in events and "comparison.completed" not in events
    assert "epsilon.reserved" not in events
