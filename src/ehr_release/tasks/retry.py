"""When a task may be retried: transient I/O and database errors only.

A validation or privacy failure is deterministic — retrying it would only repeat it (or,
worse, spend privacy budget again) — so those are never retried.
"""

from __future__ import annotations

import logging
from typing import Any

from ehr_release.core.errors import EhrReleaseError, stored_error
from ehr_release.tasks.redaction import RedactedError
from ehr_release.tasks.transient import TRANSIENT


def is_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's retry condition: retry transient errors only, and audit every retry."""
    try:
        state.result()
    except RedactedError as exc:  # a bug's or the database's failure, its message withheld
        if exc.transient:
            _audit_retry(task, task_run, exc)
        return exc.transient
    except EhrReleaseError:
        return False
    except TRANSIENT as exc:
        _audit_retry(task, task_run, exc)
        return True
    except Exception:
        return False
    return False


def _current_run_id() -> str | None:
    """The release id of the flow this task runs in (its ``request`` parameter)."""
    from prefect.runtime import flow_run

    request = (flow_run.parameters or {}).get("request")
    run_id = getattr(request, "run_id", None)
    if run_id is None and isinstance(request, dict):
        run_id = request.get("run_id")
    return run_id


def _audit_retry(task: Any, task_run: Any, exc: BaseException) -> None:
    """Record the failed attempt; if the database is what failed, only log it."""
    from ehr_release.storage.actions import AuditAction
    from ehr_release.storage.audit import record_event

    payload = {"task": getattr(task, "name", str(task)),
               "attempt": int(getattr(task_run, "run_count", 0) or 0),
               "error": stored_error(exc)}
    try:
        record_event(actor="system:retry", action=AuditAction.TASK_RETRYING,
                     run_id=_current_run_id(), payload=payload)
    except Exception:  # noqa: BLE001 - the retry must go ahead even if auditing fails
        logging.getLogger(__name__).warning("could not audit retry of %s", payload["task"],
                                            exc_info=True)
