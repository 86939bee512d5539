"""DiffGen through the whole governed flow: anonymize → verify → evaluate → certify →
approve → publish, under Prefect's test harness (slow: it starts a Prefect server)."""

from __future__ import annotations

import json

import pytest

from ehr_release.samples.sample import CLASS_COLUMN, generate_sample, write_sample
from ehr_release.storage import runs
from ehr_release.storage.runs import Status
from ehr_release.storage.site_policy import set_epsilon_total
from tests.flow_helpers import decide, start, wait_status

pytestmark = pytest.mark.slow


def test_diffgen_release_is_published_with_its_ledger(harness, ehr_home, tmp_path) -> None:
    from ehr_release.planning.request import ReleaseRequest
    from ehr_release.storage.audit import export_events

    data = write_sample(generate_sample(400, seed=2), tmp_path / "patients.csv")
    out = tmp_path / "out"
    req = ReleaseRequest(
        run_id=runs.new_run_id(), input_path=str(data), class_column=CLASS_COLUMN,
        algorithm="diffgen", requester="steward", out_dir=str(out), approval_timeout_s=300,
        # 400 patients at ε = 1 classify worse than the majority class: refused unless waived
        allow_low_utility=True,
        params={"epsilon": "1", "h": "4", "taxonomies": "mimic-demo", "eval_runs": "1",
                "predictors": "age,gender,ethnicity,marital_status,insurance,codes"})
    thread, box = start(req)
    status = wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}, timeout=300)
    assert status == Status.AWAITING_APPROVAL, runs.get_run(req.run_id).error
    verification = runs.latest_verification(req.run_id)
    assert verification["holds"]
    assert "ε composition" in {r["name"] for r in verification["requirements"]}
    decide(req.run_id, "approve")
    thread.join(180)
    assert box.get("result") == "published", box
    folder = out / "releases" / req.run_id
    assert {"groups.csv", "cut.json", "ledger.json", "datasheet.pdf", "manifest.json"} == \
        {p.name for p in folder.iterdir()}
    ledger = json.loads((folder / "ledger.json").read_text())
    assert ledger["spent"] == "1" and ledger["epsilon_prime"] == "1/18"
    assert export_events(req.run_id, "jsonl").count('"action":"epsilon.reserved"') == 1


def _run_to_failure(tmp_path):
    """A DiffGen request at ε = 1 on 60 generated patients, run until it fails."""
    from ehr_release.planning.request import ReleaseRequest

    data = write_sample(generate_sample(60, seed=2), tmp_path / "patients.csv")
    req = ReleaseRequest(
        run_id=runs.new_run_id(), input_path=str(data), class_column=CLASS_COLUMN,
        algorithm="diffgen", requester="steward", out_dir=str(tmp_path / "out"),
        params={"epsilon": "1", "h": "2", "taxonomies": "mimic-demo", "eval_runs": "0",
                "predictors": "age,gender,codes"})
    thread, _ = start(req)
    assert wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED},
                       timeout=120) == Status.FAILED
    thread.join(60)
    return req


def test_a_draw_beyond_the_extracts_epsilon_total_is_never_made(harness, ehr_home, tmp_path,
                                                                monkeypatch) -> None:
    """With a site total below the request's ε the run fails before DiffGen runs: nothing is
    drawn, so nothing is pinned (a draw the steward sees would itself spend ε)."""
    from ehr_release.storage.audit import export_events

    set_epsilon_total("0.5", actor="admin", reason="test")
    req = _run_to_failure(tmp_path)
    assert "exceed the ε budget" in (runs.get_run(req.run_id).error or "")
    assert runs.pinned_candidate(req.run_id) == {}
    assert "epsilon.reserved" not in export_events(req.run_id, "jsonl")  # refused: none


def test_a_run_that_fails_before_drawing_gives_its_reservation_back(harness, ehr_home,
                                                                    tmp_path, monkeypatch):
    """The run reserves its ε before DiffGen runs (``epsilon.reserved``); the anonymizer
    fails, nothing is drawn nor pinned, so the flow gives the ε back (``epsilon.released``):
    nothing of it was seen."""
    from ehr_release.flows import release
    from ehr_release.storage.audit import export_events

    class Broken:
        def with_options(self, **_):
            return self

        def __call__(self, plan):
            raise RuntimeError("the anonymizer broke")

    monkeypatch.setattr(release, "anonymize_task", Broken())
    req = _run_to_failure(tmp_path)
    events = export_events(req.run_id, "jsonl")
    assert events.count('"action":"epsilon.reserved"') == 1
    assert events.count('"action":"epsilon.released"') == 1
    assert runs.pinned_candidate(req.run_id) == {}
