"""The history page: each source's releases, their overlap, ε per patient, what binds next.

What a reviewer needs before approving a release of patients the site released before
(:mod:`ehr_release.history.view`; run ids, parameters and counts only).
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from ehr_release.dashboard.pages import render
from ehr_release.dashboard.security import Who

router = APIRouter()


@router.get("/history", response_class=HTMLResponse)
def history(request: Request, who: Who, source: str | None = None) -> HTMLResponse:
    from ehr_release.history.view import source_history
    from ehr_release.storage.site_policy import sources

    if source is not None and source not in sources():
        raise HTTPException(status_code=404, detail="no such source")
    return render(request, "history.html.j2", who, histories=source_history(source))
