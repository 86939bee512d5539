"""``release_flow``: ingest → link → anonymize → verify → attack → history → evaluate →
certify → park.

The evaluation may run beside verify and attack, and the certificate beside the datasheet,
on a second CPU (:mod:`ehr_release.tasks.aside`); the report is taken, and recorded, in
this order all the same, and a run that fails before does not wait for it.

The flow ends when the run awaits a reviewer: its publication bundle is persisted
(:mod:`ehr_release.release.bundle`) and no process waits for the decision. The recorded decision
starts :func:`~ehr_release.flows.publish.publish_flow`. The body only sequences tasks and
branches. It fails closed: a verification or attack that does not hold, or a release not worth
publishing, ends the run without reaching a reviewer, and any exception marks the run failed
with an audit event before it propagates. While it works, the flow holds the run's lease; a
process that is killed (SIGKILL, a reboot) lets it lapse, so the run shows as ``stalled``
and ``ehr-release resume`` restarts it, reusing the cached anonymization.
"""

from __future__ import annotations

import time

from prefect import flow
from prefect.runtime import flow_run

from ehr_release.core.errors import EhrReleaseError, stored_error
from ehr_release.flows.ending import fail_run
from ehr_release.flows.head_start import load_certificate_modules
from ehr_release.flows.tagging import tagged
from ehr_release.governance.publishable import (
    count_records,
    empty_release_waivers,
    low_utility_waivers,
)
from ehr_release.model.reports import ReleaseOutcome, Requirement, VerificationReport
from ehr_release.planning.request import ReleaseRequest
from ehr_release.storage import runs
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.budget import dp_algorithm_names, refuse_beyond_total, release_undrawn
from ehr_release.storage.pending import hold_lease
from ehr_release.storage.runs import Status
from ehr_release.tasks.algorithm_stages import (
    anonymize_task,
    attack_task,
    evaluate_task,
    pin_candidate_task,
    verify_task,
)
from ehr_release.tasks.aside import begin_evaluation, evaluation_pending, stop_worker
from ehr_release.tasks.caching import stage_cache
from ehr_release.tasks.certify import certify_task, park_task
from ehr_release.tasks.history import history_task, link_extract_task
from ehr_release.tasks.ingest import ingest_task
from ehr_release.tasks.logs import since, stage_log
from ehr_release.tasks.naming import describe
from ehr_release.tasks.redaction import redacted
from ehr_release.tasks.status import FLOW_ACTOR, advance_task


class VerificationFailed(EhrReleaseError):
    """The independent verifier did not confirm the privacy guarantee; nothing is published.

    What a verifier measured on a failed release may quote what failed — a class's exact
    demographics and its rare codes, a lone trajectory, an original code's true count —
    which the model no longer covers. The terminal gets it; the stored message (run record,
    audit trail, Prefect state) names the failed requirements only.
    """

    def __init__(self, failures: list[Requirement]) -> None:
        self.failed = [r.name for r in failures]
        super().__init__("verification failed — "
                         + "; ".join(f"{r.name}: {r.measured}" for r in failures))

    def public(self) -> str:
        return f"verification failed — did not hold: {', '.join(self.failed)}"


@flow(name="release_flow", flow_run_name="release-{request.run_id}", persist_result=False,
      log_prints=True)
@redacted
def release_flow(request: ReleaseRequest) -> str:
    """Run one governed release up to the reviewer; returns the run's status."""
    started = time.perf_counter()
    with hold_lease(request.run_id, "release_flow"), \
            tagged(request.run_id, request.algorithm, request.source):
        stage_log("release", f"run {request.run_id}: "
                             f"{describe(request.algorithm, request.params)}, source "
                             f"{request.source!r}")
        status = _release(request)
        stage_log("release", f"run {request.run_id} is {status} after {since(started)}")
        return status


def _release(request: ReleaseRequest) -> str:
    run_id = request.run_id
    try:
        plan = ingest_task(request)
    except Exception as exc:
        record_event(actor=request.requester, action=AuditAction.INGEST_REJECTED,
                     payload={"request": run_id, "input": request.input_path,
                              "error": stored_error(exc)})
        if runs.find_run(run_id) is not None:  # registered before the flow started (CLI)
            runs.fail_run(run_id, actor=FLOW_ACTOR,
                          error=stored_error(exc))
        raise
    try:
        runs.set_flow_run_id(run_id, str(flow_run.get_id()))
        links = link_extract_task(plan)  # before drawing: later accounts must see this run
        refuse_beyond_total(run_id, dp_algorithm_names())  # before drawing: a draw counts
        files = anonymize_task.with_options(result_storage=stage_cache(run_id))(plan)
        pin_candidate_task(run_id, files)
        begin_evaluation(plan, files)  # on the second CPU, if the head start spawned one
        advance_task(run_id, Status.ANONYMIZED, {"files": sorted(files)})
        verification = verify_task(plan, files)
        _require(verification)
        verification, attack = attack_task(plan, files, verification)
        _require(verification)
        verification = history_task(plan, files, links, verification)
        _require(verification)
        records = count_records(plan.entry, files)
        waivers = empty_release_waivers(records, allow_empty=request.allow_empty)
        advance_task(run_id, Status.VERIFIED)
        if evaluation_pending(run_id):  # spend the wait loading what certify renders with;
            load_certificate_modules()   # else it loads once the certificate went aside
        utility = evaluate_task(plan, files)
        waivers += low_utility_waivers(utility, allow_low_utility=request.allow_low_utility)
        advance_task(run_id, Status.EVALUATED)
        outcome = ReleaseOutcome(records=records, attack=attack, waivers=waivers)
        certify_task(plan, files, verification, utility, outcome)
        advance_task(run_id, Status.CERTIFIED)
        stop_worker()  # the second process, if any, has nothing left to do
        park_task(run_id, files, verification, utility, outcome, request)
        advance_task(run_id, Status.AWAITING_APPROVAL)
        return Status.AWAITING_APPROVAL.value  # a decision may already have moved it on
    except Exception as exc:
        fail_run(run_id, FLOW_ACTOR, exc)
        release_undrawn(run_id)  # nothing drawn, nothing seen: its ε is given back
        stop_worker()  # work begun aside is not waited for
        raise


def _require(verification: VerificationReport) -> None:
    """Stop the run unless every requirement so far held (nothing reaches a reviewer)."""
    if not verification.holds:
        raise VerificationFailed(verification.failures)
