"""Issue 15 item 4: awaiting approval is durable state, not a waiting process.

The flow-level paths (decision publishes, crash and resume, timeout) are in test_flow,
test_crashes and test_e2e_cli; here the pieces they rest on: the lease that tells a working
flow from a dead one, the persisted bundle, and the approval window enforced on sight.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from ehr_release.model.reports import (
    AttackReport,
    Chart,
    ReleaseOutcome,
    Requirement,
    UtilityReport,
    VerificationReport,
)
from ehr_release.planning.request import DataUse
from ehr_release.release import bundle
from ehr_release.service import expire_overdue, run_state
from ehr_release.storage import pending, runs
from ehr_release.storage.audit import export_events
from ehr_release.storage.engine import get_engine
from ehr_release.storage.runs import Status
from tests.test_storage import make_run, to_awaiting


def _park(run_id: str, timeout_s: int = 3600) -> None:
    bundle.park(run_id, {"counts.json": b'{"401.9": 5}'},
                VerificationReport("code-counts", [Requirement("k", "≥ 5", "5", True)]),
                UtilityReport("code-counts", {"kept": 1.0},
                              charts=[Chart("c", "a chart", b"\x89PNG fake")]),
                ReleaseOutcome(3, AttackReport("knows a code", 3, True, 5, 5, True),
                               ["a waiver"]),
                DataUse("Dr. A", "study", "no linkage"), timeout_s)


def test_the_bundle_round_trips_everything_publishing_needs(any_db) -> None:
    run = make_run(get_engine())
    _park(run.id)
    back = bundle.load(run.id, {"counts.json": ("x", 0)})
    assert back.files == {"counts.json": b'{"401.9": 5}'}
    assert back.utility.charts[0].png == b"\x89PNG fake"
    assert back.outcome.attack is not None and back.outcome.attack.smallest_candidate_set == 5
    assert back.outcome.waivers == ["a waiver"] and back.data_use.recipient == "Dr. A"
    assert back.verification.holds
    import stat

    folder = bundle.candidate_dir(run.id)
    assert stat.S_IMODE((folder / "counts.json").stat().st_mode) == 0o600


def test_a_run_without_a_live_flow_is_stalled_with_the_command_that_continues(
        any_db) -> None:
    engine = get_engine()
    run = make_run(engine)
    assert run_state(run.id).stalled  # requested, nobody working on it
    assert f"ehr-release resume {run.id}" in run_state(run.id).next_step
    with pending.hold_lease(run.id, "test"):
        assert not run_state(run.id).stalled
    assert run_state(run.id).stalled
    to_awaiting(run.id, engine)
    state = run_state(run.id)
    assert not state.stalled and "ehr-release approve" in state.next_step  # no process needed
    runs.decide(run.id, reviewer="rita", decision="approve", reason="ok", engine=engine)
    assert f"ehr-release publish {run.id}" in run_state(run.id).next_step


def test_a_lease_whose_process_died_is_lost_at_once(any_db) -> None:
    run = make_run(get_engine())
    code = ("import sys; from ehr_release.storage.pending import _renew; "
            "from ehr_release.storage.engine import get_engine; "
            f"_renew({run.id!r}, 'dead flow', get_engine())")
    subprocess.run([sys.executable, "-c", code], check=True)  # renews, then exits
    lease = pending.get_pending  # noqa: F841 - the row exists, but its holder is gone
    assert not pending.lease_alive(run.id)
    assert run_state(run.id).stalled


def test_the_approval_window_is_enforced_whenever_someone_looks(any_db) -> None:
    engine = get_engine()
    late, fresh = make_run(engine), make_run(engine)
    for run, timeout in ((late, 1), (fresh, 3600)):
        to_awaiting(run.id, engine)
        _park(run.id, timeout)
    time.sleep(1.2)
    assert expire_overdue() == [late.id]
    assert runs.get_run(late.id).status == Status.REJECTED
    assert runs.get_run(fresh.id).status == Status.AWAITING_APPROVAL
    assert not bundle.candidate_dir(late.id).exists()
    events = [json.loads(x) for x in export_events(late.id, "jsonl").splitlines()]
    assert events[-1]["actor"] == "system:approval-timeout"
    assert expire_overdue() == []  # once
