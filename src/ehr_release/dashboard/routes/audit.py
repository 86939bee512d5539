"""The audit page: the latest events and the integrity check, for auditors and reviewers."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from ehr_release.dashboard.pages import render
from ehr_release.dashboard.security import Who
from ehr_release.storage.audit import iter_events

router = APIRouter()


@router.get("/audit", response_class=HTMLResponse)
def audit(request: Request, who: Who) -> HTMLResponse:
    if who.role not in {"auditor", "reviewer"}:
        raise HTTPException(status_code=403, detail="only auditors and reviewers")
    events = list(iter_events(None))[-500:]
    from ehr_release.integrity import check_integrity

    problems, summary = check_integrity()
    return render(request, "audit.html.j2", who, events=events, problems=problems,
                  summary=summary)
