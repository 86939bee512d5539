"""The first rows of a run's release (:mod:`ehr_release.dashboard.release_rows`).

A page of its own, not a section of the run page: looking at released records is access to
the data, so each view is an audit event, and the run page (which reloads itself while a
flow works) would record one per reload. Stewards and reviewers may look; auditors read the
trail, not the data.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from ehr_release.dashboard.pages import render
from ehr_release.dashboard.release_rows import ROWS, release_rows
from ehr_release.dashboard.routes.runs import run_or_404
from ehr_release.dashboard.security import Who
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event

router = APIRouter()
ROLES = frozenset({"steward", "reviewer"})


@router.get("/runs/{run_id}/rows", response_class=HTMLResponse)
def rows(request: Request, run_id: str, who: Who) -> HTMLResponse:
    run = run_or_404(run_id)
    if who.role not in ROLES:
        raise HTTPException(status_code=403, detail="only stewards and reviewers see the "
                            "released records")
    shown = release_rows(run)
    if shown.origin is not None:
        record_event(actor=who.name, action=AuditAction.RELEASE_ROWS_VIEWED, run_id=run_id,
                     payload={"origin": shown.origin,
                              "files": [f.name for f in shown.files],
                              "rows_shown": sum(len(f.rows) for f in shown.files)})
    return render(request, "rows.html.j2", who, run=run, shown=shown, limit=ROWS)
