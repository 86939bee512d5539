"""How a flow ends a run that failed, whichever flow it is.

A failed run is terminal (it cannot be resumed), so two things go together: the run is
recorded ``failed`` with the error's stored text (never a patient value:
:func:`ehr_release.core.errors.stored_error`), and every candidate copy it left — the parked
bundle, the cached anonymization — is removed (:func:`ehr_release.release.bundle.discard`). One
function, so no flow can do one and forget the other.
"""

from __future__ import annotations

from ehr_release.core.errors import stored_error
from ehr_release.release import bundle
from ehr_release.storage import runs


def fail_run(run_id: str, actor: str, exc: BaseException) -> None:
    """Record ``run_id`` failed by ``exc`` and discard its candidate copies."""
    runs.fail_run(run_id, actor=actor, error=stored_error(exc))
    bundle.discard(run_id)
