"""``publish_flow``: a recorded approval, turned into a published release.

Started by whoever records the decision — ``ehr-release approve``, the dashboard, or a run of
the ``publish-release`` deployment — never by a process that waited for it. It reads the
run's persisted bundle (:mod:`ehr_release.bundle`), and :func:`publish_release` refuses
anything but an approved run whose files are byte-for-byte the pinned candidate. A publish
that dies midway leaves the run ``approved`` and its lease lapsed (``stalled``); running the
flow again finishes it, clearing what the interrupted attempt left behind.
"""

from __future__ import annotations

from prefect import flow

from ehr_release import bundle
from ehr_release.flows.ending import fail_run
from ehr_release.storage import runs
from ehr_release.storage.pending import hold_lease
from ehr_release.storage.runs import Status
from ehr_release.tasks.publish import publish_task
from ehr_release.tasks.redaction import redacted
from ehr_release.tasks.status import FLOW_ACTOR

PUBLISH_ACTOR = "system:publish_flow"


@flow(name="publish_flow", flow_run_name="publish-{run_id}", persist_result=False,
      log_prints=True)
@redacted
def publish_flow(run_id: str) -> str:
    """Publish an approved run; returns its final status (``published`` or ``failed``)."""
    with hold_lease(run_id, "publish_flow"):
        if runs.get_run(run_id).status == Status.PUBLISHED:
            return Status.PUBLISHED.value
        try:
            parts = bundle.load(run_id, runs.pinned_candidate(run_id))
            publish_task(run_id, parts.files, parts.verification, parts.utility,
                         FLOW_ACTOR, parts.outcome, parts.data_use)
        except Exception as exc:
            fail_run(run_id, PUBLISH_ACTOR, exc)
            raise
        bundle.discard(run_id)
        return Status.PUBLISHED.value
