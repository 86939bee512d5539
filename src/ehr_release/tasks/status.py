"""Moving a run through its state machine from the flow."""

from __future__ import annotations

from typing import Any

from prefect import task

from ehr_release.storage import runs
from ehr_release.storage.run_status import Status, reached
from ehr_release.tasks.logs import stage_log
from ehr_release.tasks.redaction import redacted
from ehr_release.tasks.retry import is_transient

FLOW_ACTOR = "system:release_flow"


@task(name="advance", task_run_name="advance[{to}]", retries=3, retry_delay_seconds=1,
      retry_condition_fn=is_transient, cache_policy=None, persist_result=False)
@redacted
def advance_task(run_id: str, to: Status, payload: dict[str, Any] | None = None) -> None:
    """Transition ``run_id`` to ``to``; a no-op if it already got there (a resumed run)."""
    if reached(Status(runs.get_run(run_id).status), to):
        stage_log("status", f"already {to.value} (a resumed run)")
        return
    runs.transition(run_id, to, actor=FLOW_ACTOR, payload=payload)
    stage_log("status", f"run {run_id} is now {to.value}")
