"""The release flow judges a syntactic release with its history (slow: Prefect harness).

Issue 31, findings 3 and 4, end to end: E published, then E minus one patient (a
differencing pair) and E with m=1 (weaker) each fail before a reviewer sees them; the same
request again (an identical re-run) reaches the reviewer, shown as such.
"""

from __future__ import annotations

import pytest

from ehr_release.samples.sample import generate_sample, write_sample
from ehr_release.storage import runs
from ehr_release.storage.runs import Status
from tests.flow_helpers import request_for, run_approved, start, wait_status

pytestmark = pytest.mark.slow


def _failed(req) -> str:
    thread, _ = start(req)
    assert wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == Status.FAILED
    thread.join(60)
    return runs.get_run(req.run_id).error or ""


def test_differencing_and_weaker_releases_fail_and_a_rerun_is_shown(harness, test_site,
                                                                    tmp_path) -> None:
    extract = generate_sample(150, seed=8)
    whole, minus_one = tmp_path / "e.csv", tmp_path / "e-1.csv"
    write_sample(extract, whole)
    keep = extract.patient_ids[1:]
    from ehr_release.model.dataset import Dataset

    write_sample(Dataset(extract.patients.loc[keep], extract.diagnoses[
        extract.diagnoses["patient_id"].isin(keep)].reset_index(drop=True)), minus_one)
    params = {"k": "5", "m": "2", "seed": "3"}
    first = request_for(whole, tmp_path / "out", "disassociation")
    first = first.model_copy(update={"params": params})
    assert run_approved(first)["result"] == Status.PUBLISHED

    differencing = request_for(minus_one, tmp_path / "out", "disassociation")
    error = _failed(differencing.model_copy(update={"params": params}))
    assert "release history" in error

    weaker = request_for(whole, tmp_path / "out", "disassociation")
    error = _failed(weaker.model_copy(update={"params": {**params, "m": "1"}}))
    assert "release history" in error

    again = request_for(whole, tmp_path / "out", "disassociation")
    again = again.model_copy(update={"params": params})
    thread, _ = start(again)
    assert wait_status(again.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL
    from ehr_release.storage.pending import get_pending

    shown = get_pending(again.run_id).verification_json
    assert "identical re-run of " + first.run_id in shown
