"""The approval gate: the flow waits, paused, for a reviewer's recorded decision.

It fails closed. The authority is the database: a reviewer's decision is recorded by
:func:`ehr_release.storage.runs.decide` (which refuses self-approval, a missing reason or a
second decision) before the paused flow is resumed with an :class:`ApprovalInput`. When
resumed, the gate re-reads the recorded decision; input that does not match one (e.g. typed
into the Prefect UI by hand) is logged as an audit event and the flow pauses again. No
answer before the timeout means rejected.
"""

from __future__ import annotations

import time

from prefect import get_run_logger
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput

from ehr_release.reports import VerificationReport
from ehr_release.storage import runs
from ehr_release.storage.audit import record_event
from ehr_release.storage.runs import Status

TIMEOUT_ACTOR = "system:approval-timeout"
GATE_ACTOR = "system:approval-gate"


class ApprovalInput(RunInput):
    """What resumes the gate. ``approved`` defaults to False: silence never approves."""

    approved: bool = False
    reviewer: str = ""
    reason: str = ""


def gate_description(run_id: str, report: VerificationReport) -> str:
    """Markdown shown beside the resume form: the verification results in brief."""
    lines = [f"### Release `{run_id}` awaits a decision", "",
             "Verification: **" + ("all requirements hold" if report.holds else "FAILED") + "**",
             "", "| requirement | required | measured |", "|---|---|---|"]
    lines += [f"| {r.name} | {r.required} | {r.measured} |" for r in report.requirements]
    lines += ["", "Record the decision with `ehr-release approve RUN_ID --reviewer NAME "
              "--decision approve|reject --reason TEXT`; input without a recorded decision "
              "is ignored."]
    return "\n".join(lines)


def wait_for_decision(run_id: str, report: VerificationReport, timeout_s: int,
                      poll_interval_s: int = 2) -> bool:
    """Pause until a valid decision arrives; True only for a recorded approval."""
    logger = get_run_logger()
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        early = runs.get_approval(run_id)
        if early is not None:  # decided between the status change and the pause
            logger.info("Decision for %s already recorded: %s by %s", run_id,
                        early.decision, early.reviewer)
            return early.decision == "approve"
        remaining = int(deadline - time.monotonic())
        if remaining <= 0:
            return _time_out(run_id, timeout_s)
        form = ApprovalInput.with_initial_data(description=gate_description(run_id, report))
        try:
            answer = pause_flow_run(wait_for_input=form, timeout=remaining,
                                    poll_interval=poll_interval_s, key=f"approval-{attempt}")
        except FlowPauseTimeout:
            return _time_out(run_id, timeout_s)
        recorded = runs.get_approval(run_id)
        if (recorded is not None and recorded.reviewer == answer.reviewer
                and (recorded.decision == "approve") == answer.approved):
            logger.info("Decision for %s: %s by %s", run_id, recorded.decision,
                        recorded.reviewer)
            return recorded.decision == "approve"
        record_event(actor=GATE_ACTOR, action="approval.input_ignored", run_id=run_id,
                     payload={"reviewer": answer.reviewer, "approved": answer.approved,
                              "why": "no matching decision recorded"})
        logger.warning("Ignoring approval input without a recorded decision; pausing again")
        attempt += 1


def _time_out(run_id: str, timeout_s: int) -> bool:
    if runs.get_run(run_id).status == Status.AWAITING_APPROVAL:
        runs.transition(run_id, Status.REJECTED, actor=TIMEOUT_ACTOR,
                        payload={"reason": f"no decision within {timeout_s} s"})
    return False
