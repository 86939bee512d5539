"""The run's certificate and datasheet as PDF downloads; each download is an audit event."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

from ehr_release.core.files import check_safe_name
from ehr_release.dashboard.documents import certificate_file, datasheet_file
from ehr_release.dashboard.routes.runs import run_or_404
from ehr_release.dashboard.security import Who
from ehr_release.storage.actions import download_action
from ehr_release.storage.audit import record_event
from ehr_release.storage.users import SignedIn

router = APIRouter()


@router.get("/runs/{run_id}/certificate.pdf")
def certificate(run_id: str, who: Who) -> FileResponse:
    return _download(run_id, who, certificate_file, "certificate")


@router.get("/runs/{run_id}/datasheet.pdf")
def datasheet(run_id: str, who: Who) -> FileResponse:
    return _download(run_id, who, datasheet_file, "datasheet")


def _download(run_id: str, who: SignedIn, locate: Callable[[str], Path | None],
              what: str) -> FileResponse:
    """Serve the run's current ``what`` PDF; each download is an audit event."""
    run_or_404(run_id)
    path = locate(run_id)
    if path is None:
        raise HTTPException(status_code=404, detail=f"no {what} yet")
    record_event(actor=who.name, action=download_action(what), run_id=run_id,
                 payload={"file": path.name})
    return FileResponse(path, media_type="application/pdf",
                        filename=f"{check_safe_name(run_id)}-{path.name}")
