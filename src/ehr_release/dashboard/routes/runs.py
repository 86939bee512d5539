"""The run list, a run's page, and the reviewer's decision.

A decision goes through exactly the same path as ``ehr-release approve``
(:func:`ehr_release.service.decide`): recorded by :func:`ehr_release.storage.runs.decide`
(which refuses self-approval, blank reasons and second decisions, with an audit event); an
approval then starts the publishing flow in this process. No flow waits for the decision. A
refused decision re-renders the run page with the reason (403/400/409); a recorded one whose
publishing failed does too (502: the decision stands, the step behind it did not finish, and
the page shows the run as stalled with the command that continues it); otherwise the browser
is redirected to the run page, which says the status the run ended in, read from the
database (never words carried in the URL).
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ehr_release import service
from ehr_release.core.errors import ApprovalError, EhrReleaseError, NotFound, stored_error
from ehr_release.dashboard.pages import render
from ehr_release.dashboard.runview import NEEDS_OTHER, decision_notice, index_rows, run_view
from ehr_release.dashboard.security import Who, csrf_guard
from ehr_release.dashboard.settings import settings_of
from ehr_release.governance.identity import same_person
from ehr_release.storage import chained, runs
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.models import ReleaseRun
from ehr_release.storage.users import SignedIn

router = APIRouter()
_LOG = logging.getLogger("ehr_release.dashboard")


def run_or_404(run_id: str) -> ReleaseRun:
    try:
        return runs.get_run(run_id)
    except NotFound:
        raise HTTPException(status_code=404, detail="no such run") from None


@router.get("/", response_class=HTMLResponse)
def home(request: Request, who: Who) -> HTMLResponse:
    service.expire_overdue()
    pending, recent = index_rows(who)
    return render(request, "index.html.j2", who, pending=pending, recent=recent,
                  needs_other=NEEDS_OTHER)


def run_page_response(request: Request, who: SignedIn, run_id: str, *,
                      status_code: int = 200, notice: str | None = None,
                      error: str | None = None) -> HTMLResponse:
    run_or_404(run_id)
    service.expire_overdue(run_id)  # a closed window shows as rejected, not as a live form
    view = run_view(runs.get_run(run_id), who)
    return render(request, "run.html.j2", who, status_code, notice=notice, error=error,
                  needs_other=NEEDS_OTHER, **view)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str, who: Who, decided: bool = False) -> HTMLResponse:
    return run_page_response(request, who, run_id,
                             notice=decision_notice(run_id) if decided else None)


@router.post("/runs/{run_id}/decision", dependencies=[Depends(csrf_guard)])
def decide(request: Request, run_id: str, who: Who, decision: Annotated[str, Form()],
           reason: Annotated[str, Form()]) -> Response:
    run = run_or_404(run_id)
    if who.role != "reviewer":
        record_event(actor=who.name, action=AuditAction.APPROVAL_REFUSED, run_id=run_id,
                     payload={"why": f"role {who.role} may not decide releases"})
        raise HTTPException(status_code=403, detail=f"a {who.role} may not decide releases")
    try:
        service.decide(run_id, reviewer=who.name, decision=decision, reason=reason,
                       publisher=settings_of(request).publish, channel="dashboard",
                       role=who.role)
    except ApprovalError as exc:
        return run_page_response(request, who, run_id, error=f"Refused: {exc}",
                                 status_code=_refusal_status(run, who, decision, reason))
    except (EhrReleaseError, TimeoutError, RuntimeError) as exc:
        _LOG.error("dashboard: publishing %s after its decision failed with %s", run_id,
                   type(exc).__name__)
        return run_page_response(
            request, who, run_id, status_code=502,
            error=f"Decision recorded, but publishing did not finish ({stored_error(exc)}).")
    return RedirectResponse(f"/runs/{run_id}?decided=1", status_code=303)


@router.post("/runs/{run_id}/publish", dependencies=[Depends(csrf_guard)])
def retry_publish(request: Request, run_id: str, who: Who) -> Response:
    """Run the publishing flow again for an approved run whose publishing failed or stopped.

    Only a reviewer may; the flow publishes nothing but the pinned, verified candidate the
    decision approved (:func:`ehr_release.tasks.publish.publish_release` checks it again).
    """
    run_or_404(run_id)
    if who.role != "reviewer":
        record_event(actor=who.name, action=AuditAction.PUBLISH_REFUSED, run_id=run_id,
                     payload={"why": f"role {who.role} may not publish releases"})
        raise HTTPException(status_code=403, detail=f"a {who.role} may not publish releases")
    try:
        settings_of(request).publish(run_id)
    except EhrReleaseError as exc:
        return run_page_response(request, who, run_id, status_code=409,
                                 error=f"Refused: {exc}")
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


def _refusal_status(run: ReleaseRun, who: SignedIn, decision: str, reason: str) -> int:
    """403 for the four-eyes rule, 400 for a malformed decision, 409 for a run's state."""
    if same_person(chained.requester(run.id) or run.requester, who.name):
        return 403
    if decision not in runs.DECISIONS or not reason.strip():
        return 400
    return 409
