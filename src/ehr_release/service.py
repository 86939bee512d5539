"""What the CLI (and later the dashboard) calls: start a release, decide it, watch it.

Kept apart from the CLI so every entry point enforces the same rules through the same code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ehr_release.errors import EhrReleaseError, NotFound, stored_message
from ehr_release.files import write_durably
from ehr_release.flows.runners import check_runner_spec
from ehr_release.registry import get as get_algorithm
from ehr_release.request import ReleaseRequest
from ehr_release.storage import runs
from ehr_release.storage.audit import record_event
from ehr_release.storage.engine import home
from ehr_release.storage.runs import TERMINAL, Status

SETTLED = TERMINAL | {Status.AWAITING_APPROVAL}


class FlowNotRunning(EhrReleaseError):
    """The decision was recorded but no paused flow is there to act on it."""


def precheck(request: ReleaseRequest) -> None:
    """Reject a bad request before any process starts; the refusal is an audit event.

    The flow's ingest task checks the same things again (it must not trust its caller).
    """
    from ehr_release.tasks.ingest import load_request_dataset

    try:
        get_algorithm(request.algorithm).parse(request.params)
        load_request_dataset(request)
    except EhrReleaseError as exc:
        record_event(actor=request.requester, action="ingest.rejected",
                     payload={"request": request.run_id, "input": request.input_path,
                              "error": stored_message(exc)})
        raise


def refuse_self_approval(request: ReleaseRequest, reviewer: str) -> None:
    """A requester may never approve their own release (four-eyes principle)."""
    if reviewer.strip().casefold() == request.requester.strip().casefold():
        message = f"reviewer {reviewer!r} requested this release and may not approve it"
        record_event(actor=reviewer, action="approval.refused",
                     payload={"request": request.run_id, "reason": message})
        raise EhrReleaseError(message)


def launch_background(request: ReleaseRequest, api_url: str) -> subprocess.Popen[bytes]:
    """Start the flow in a detached process that survives this one (it may wait for days)."""
    work = home() / "runs" / request.run_id
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    req_file = work / "request.json"
    write_durably(req_file, request.model_dump_json().encode(), private=True)
    log_path = work / "flow.log"
    os.close(os.open(log_path, os.O_CREAT | os.O_WRONLY, 0o600))
    log = log_path.open("ab")
    env = {**os.environ, "PREFECT_API_URL": api_url}
    return subprocess.Popen([sys.executable, "-m", "ehr_release.flows.launch", str(req_file)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, start_new_session=True)


def wait_for_status(run_id: str, targets: frozenset[Status], *, timeout_s: float,
                    proc: subprocess.Popen[bytes] | None = None) -> Status:
    """Poll the run's status until it is one of ``targets``.

    If the flow process ends before the run even exists, its log explains why (bad input).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            status = Status(runs.get_run(run_id).status)
        except NotFound:
            status = None
        if status in targets:
            return status
        if proc is not None and proc.poll() is not None:
            time.sleep(0.2)
            try:
                status = Status(runs.get_run(run_id).status)
            except NotFound:
                raise EhrReleaseError(_last_log_line(run_id)) from None
            if status in targets:
                return status
            raise EhrReleaseError(f"the release flow stopped with the run {status}: "
                                  f"{_last_log_line(run_id)}")
        time.sleep(0.5)
    raise TimeoutError(f"run {run_id} did not reach {sorted(targets)} within {timeout_s} s")


def _last_log_line(run_id: str) -> str:
    log = home() / "runs" / run_id / "flow.log"
    if not log.exists():
        return "the release flow exited without output"
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "the release flow exited without output"


def decide_and_resume(run_id: str, *, reviewer: str, decision: str, reason: str,
                      pause_wait_s: float = 60.0) -> None:
    """Record the decision (authoritative, race-safe) and resume the paused flow with it."""
    runs.decide(run_id, reviewer=reviewer, decision=decision, reason=reason)
    resume_with_decision(run_id, pause_wait_s=pause_wait_s)


def resume_with_decision(run_id: str, *, pause_wait_s: float = 60.0) -> None:
    """Hand the recorded decision to the paused flow.

    The run shows ``awaiting_approval`` a moment before its flow actually pauses; a decision
    in that window is recorded all the same, and the gate reads it from the database before
    pausing. Here we wait for the pause to be complete (or for the flow to have moved on)
    instead of reporting a stopped flow.
    """
    from prefect.exceptions import NotPausedError
    from prefect.flow_runs import resume_flow_run

    run = runs.get_run(run_id)
    approval = runs.get_approval(run_id)
    if approval is None:
        raise EhrReleaseError(f"run {run_id} has no recorded decision to hand to its flow")
    if not run.flow_run_id:
        raise FlowNotRunning(f"decision recorded for {run_id}, but it has no flow run")
    deadline = time.monotonic() + pause_wait_s
    while True:
        try:
            resume_flow_run(run.flow_run_id, run_input={
                "approved": approval.decision == "approve", "reviewer": approval.reviewer,
                "reason": approval.reason})
            return
        except (NotPausedError, RuntimeError) as exc:
            # Prefect marks the run Paused a moment before it stores the input schema;
            # a resume in that window is refused with "Run input schema not found".
            if isinstance(exc, RuntimeError) and "schema not found" not in str(exc):
                raise
            if _flow_moved_past_gate(run_id, run.flow_run_id):
                return
            if time.monotonic() > deadline:
                raise FlowNotRunning(
                    f"decision recorded for {run_id}, but its flow did not pause within "
                    f"{pause_wait_s:.0f} s (did the flow process stop? resume it with "
                    f"`ehr-release resume {run_id}`)") from None
            time.sleep(0.5)


def _flow_moved_past_gate(run_id: str, flow_run_id: str) -> bool:
    """True once the flow no longer needs resuming: it read the decision before pausing.

    That shows as a run that went on to a final status (published, failed) or a flow run
    that ended (a rejection ends the flow without further status change).
    """
    from prefect import get_client

    if runs.get_run(run_id).status in {Status.PUBLISHED, Status.FAILED}:
        return True
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(flow_run_id).state
    return state is not None and state.is_final()


def saved_request(run_id: str) -> ReleaseRequest:
    """The request a run was started with (kept beside its work files for resuming)."""
    from ehr_release.files import check_safe_name

    path = home() / "runs" / check_safe_name(run_id) / "request.json"
    if not path.exists():
        raise NotFound(f"no saved request for run {run_id!r} in {home()}")
    return ReleaseRequest.model_validate_json(path.read_text())


def request_from_cli(*, input_path: Path, diagnoses: Path | None, admissions: Path | None,
                     class_column: str | None, algorithm: str, params: dict[str, str],
                     requester: str, out_dir: Path, approval_timeout_s: int,
                     expected_fingerprint: str | None = None,
                     task_runner: str = "threads", recipient: str | None = None,
                     purpose: str | None = None, terms: str | None = None,
                     allow_empty: bool = False,
                     allow_low_utility: bool = False) -> ReleaseRequest:
    return ReleaseRequest(run_id=runs.new_run_id(), input_path=str(input_path),
                          diagnoses_path=str(diagnoses) if diagnoses else None,
                          admissions_path=str(admissions) if admissions else None,
                          class_column=class_column, algorithm=algorithm, params=params,
                          requester=requester, out_dir=str(out_dir.resolve()),
                          approval_timeout_s=approval_timeout_s,
                          expected_fingerprint=expected_fingerprint,
                          task_runner=check_runner_spec(task_runner), recipient=recipient,
                          purpose=purpose, terms=terms, allow_empty=allow_empty,
                          allow_low_utility=allow_low_utility)
