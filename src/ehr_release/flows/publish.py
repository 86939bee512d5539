"""``publish_flow``: a recorded approval, turned into a published release.

Started by whoever records the decision — ``ehr-release approve``, the dashboard, or a run of
the ``publish-release`` deployment — never by a process that waited for it. It reads the
run's persisted bundle (:mod:`ehr_release.release.bundle`), and :func:`publish_release` refuses
anything but an approved run whose files are byte-for-byte the pinned candidate. A publish
that dies midway leaves the run ``approved`` and its lease lapsed (``stalled``); one that
fails (disk full, a broken destination) leaves it ``approved`` with the reason recorded
("publication failed", ``publish.failed`` event) and its candidate kept. Either way running
the flow again (``ehr-release publish RUN``, the dashboard's retry) finishes it from the same
pinned candidate — no new draw — clearing what the interrupted attempt left behind.
"""

from __future__ import annotations

import time

from prefect import flow

from ehr_release.core.errors import stored_error
from ehr_release.flows.ending import fail_run
from ehr_release.flows.tagging import tagged
from ehr_release.release import bundle
from ehr_release.storage import runs
from ehr_release.storage.links import source_of
from ehr_release.storage.pending import hold_lease
from ehr_release.storage.runs import Status
from ehr_release.tasks.logs import since, stage_log
from ehr_release.tasks.publish import publish_task
from ehr_release.tasks.redaction import redacted
from ehr_release.tasks.status import FLOW_ACTOR
from ehr_release.tasks.steps import step

PUBLISH_ACTOR = "system:publish_flow"


@flow(name="publish_flow", flow_run_name="publish-{run_id}", persist_result=False,
      log_prints=True)
@redacted
def publish_flow(run_id: str) -> str:
    """Publish an approved run; returns ``published``. A failure is recorded on the run (it
    stays ``approved``, "publication failed") and raised."""
    started = time.perf_counter()
    run = runs.get_run(run_id)
    with hold_lease(run_id, "publish_flow"), \
            tagged(run_id, run.algorithm, source_of(run_id) or "default"):
        if runs.get_run(run_id).status == Status.PUBLISHED:
            stage_log("publish", f"run {run_id} was published already")
            return Status.PUBLISHED.value
        try:
            step("read back the pinned candidate")
            parts = bundle.load(run_id, runs.pinned_candidate(run_id))
            stage_log("publish", f"approved run {run_id}: {len(parts.files)} pinned candidate "
                                 f"file(s) read back and matched in {since(started)}")
            publish_task(run_id, parts.files, parts.verification, parts.utility,
                         FLOW_ACTOR, parts.outcome, parts.data_use)
        except Exception as exc:
            # The approval and its pinned candidate stand: the run stays approved with the
            # reason, to be retried once the cause is fixed. Only a run that somehow left
            # ``approved`` meanwhile is ended.
            if not runs.record_publish_failure(run_id, actor=PUBLISH_ACTOR,
                                               error=stored_error(exc)):
                fail_run(run_id, PUBLISH_ACTOR, exc)
            raise
        bundle.discard(run_id)
        stage_log("publish", f"run {run_id} published after {since(started)}")
        return Status.PUBLISHED.value
