"""The audit page: events filtered and paged (:mod:`ehr_release.dashboard.auditlog`) and the
integrity check, for auditors and reviewers."""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from ehr_release.dashboard.auditlog import PAGE_SIZE, AuditFilter, BadFilter, audit_page
from ehr_release.dashboard.pages import render
from ehr_release.dashboard.security import Who

router = APIRouter()


@router.get("/audit", response_class=HTMLResponse)
def audit(request: Request, who: Who, action: str = "", run: str = "", actor: str = "",
          since: str = "", until: str = "", page: int = 1) -> HTMLResponse:
    if who.role not in {"auditor", "reviewer"}:
        raise HTTPException(status_code=403, detail="only auditors and reviewers")
    wanted = AuditFilter(action=action.strip(), run=run.strip(), actor=actor.strip(),
                         since=since.strip(), until=until.strip())
    try:
        shown = audit_page(wanted, page)
    except BadFilter as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from None
    from ehr_release.governance.integrity import check_integrity

    problems, summary = check_integrity()
    query = wanted.query()
    return render(request, "audit.html.j2", who, shown=shown, wanted=wanted,
                  problems=problems, summary=summary, page_size=PAGE_SIZE,
                  page_link=lambda n: "/audit?" + urlencode({**query, "page": n}))
