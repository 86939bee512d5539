"""``release_flow``: ingest → anonymize → verify → attack → evaluate → certify → approve →
publish.

The flow body only sequences tasks and branches. It fails closed: a verification that does
not hold, a rejection or a timeout end the run without publishing, and any exception marks
the run failed with an audit event before it propagates. A process that is killed or
interrupted (SIGKILL, Ctrl-C) leaves the run in its last status instead: ``ehr-release
resume`` restarts it, reusing the cached anonymization.
"""

from __future__ import annotations

from prefect import flow
from prefect.runtime import flow_run

from ehr_release.errors import EhrReleaseError, stored_message
from ehr_release.flows.approval import wait_for_decision
from ehr_release.publishable import count_records, empty_release_waivers, low_utility_waivers
from ehr_release.registry import get as get_algorithm
from ehr_release.reports import ReleaseOutcome, VerificationReport
from ehr_release.request import ReleaseRequest
from ehr_release.storage import runs
from ehr_release.storage.audit import record_event
from ehr_release.storage.runs import Status
from ehr_release.tasks.algorithm_stages import (
    anonymize_task,
    attack_task,
    evaluate_task,
    pin_candidate_task,
    verify_task,
)
from ehr_release.tasks.certify import certify_task
from ehr_release.tasks.ingest import ingest_task
from ehr_release.tasks.publish import publish_task
from ehr_release.tasks.status import FLOW_ACTOR, advance_task


class VerificationFailed(EhrReleaseError):
    """The independent verifier did not confirm the privacy guarantee; nothing is published."""


@flow(name="release_flow", persist_result=False)
def release_flow(request: ReleaseRequest) -> str:
    """Run one governed release; returns the run's final status."""
    run_id = request.run_id
    try:
        dataset, fingerprint = ingest_task(request)
    except Exception as exc:
        record_event(actor=request.requester, action="ingest.rejected",
                     payload={"request": run_id, "input": request.input_path,
                              "error": f"{type(exc).__name__}: {stored_message(exc)}"})
        raise
    try:
        runs.set_flow_run_id(run_id, str(flow_run.get_id()))
        common = {"run_id": run_id, "algorithm": request.algorithm, "params": request.params}
        files = anonymize_task(dataset=dataset, fingerprint=fingerprint, **common)
        pin_candidate_task(run_id, files)
        advance_task(run_id, Status.ANONYMIZED, {"files": sorted(files)})
        verification = verify_task(files=files, dataset=dataset, **common)
        _require(verification)
        verification, attack = attack_task(files=files, dataset=dataset,
                                           verification=verification, **common)
        _require(verification)
        records = count_records(get_algorithm(request.algorithm), files)
        waivers = empty_release_waivers(records, allow_empty=request.allow_empty)
        advance_task(run_id, Status.VERIFIED)
        utility = evaluate_task(files=files, dataset=dataset, **common)
        waivers += low_utility_waivers(utility, allow_low_utility=request.allow_low_utility)
        advance_task(run_id, Status.EVALUATED)
        outcome = ReleaseOutcome(records=records, attack=attack, waivers=waivers)
        certify_task(run_id, files, verification, utility, outcome, request.data_use)
        advance_task(run_id, Status.CERTIFIED)
        advance_task(run_id, Status.AWAITING_APPROVAL)
        if not runs.reached(Status(runs.get_run(run_id).status), Status.APPROVED) and \
                not wait_for_decision(run_id, verification, request.approval_timeout_s):
            return runs.get_run(run_id).status
        publish_task(run_id, files, verification, utility, FLOW_ACTOR, outcome,
                     request.data_use)
        return Status.PUBLISHED.value
    except Exception as exc:
        runs.fail_run(run_id, actor=FLOW_ACTOR,
                      error=f"{type(exc).__name__}: {stored_message(exc)}")
        raise


def _require(verification: VerificationReport) -> None:
    """Stop the run unless every requirement so far held (nothing reaches a reviewer)."""
    if not verification.holds:
        failed = "; ".join(f"{r.name}: {r.measured}" for r in verification.failures)
        raise VerificationFailed(f"verification failed — {failed}")
