"""Where a run's documents are: certificate, datasheet, and its flow run in the Prefect UI.

Why one module: the run page links each of them and the download routes serve them, and both
must agree on which file is current (the published one over the reviewer's draft).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ehr_release.documents.datasheet import DATASHEET
from ehr_release.storage import runs
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.models import ReleaseRun


def certificate_file(run_id: str) -> Path | None:
    """The filed final certificate if there is one, else the reviewer's draft."""
    return _current(run_id, final=lambda kind, _: kind == "certificate",
                    draft="certificate-draft")


def datasheet_file(run_id: str) -> Path | None:
    """The published ``datasheet.pdf`` if the run was published, else the draft datasheet."""
    return _current(run_id, final=lambda kind, path: kind == "published"
                    and path.name == DATASHEET, draft="datasheet-draft")


def _current(run_id: str, *, final: Callable[[str, Path], bool], draft: str) -> Path | None:
    """The first existing artifact ``final`` accepts, else the last existing ``draft``."""
    best: Path | None = None
    for art in runs.list_artifacts(run_id):
        path = Path(art.path)
        if final(art.kind, path) and path.exists():
            return path
        if art.kind == draft and path.exists():
            best = path
    return best


@dataclass(frozen=True)
class PrefectLinks:
    """Links to the run's flows in the Prefect UI, or why there are none."""

    flow_run: str | None
    artifacts: str | None
    why_none: str | None
    publish_flow_run: str | None = None


def prefect_links(run: ReleaseRun, events: Iterable[Any] = ()) -> PrefectLinks:
    """The release flow-run page (its Artifacts tab holds each stage's artifact) and, once
    published, the publishing flow run (its id is in the ``run.published`` audit event).

    The UI's address is the one ``ehr-release home`` prints (:func:`~ehr_release.flows.
    server.ui_url`: ``PREFECT_UI_URL``, else this home's running local server); only an
    http(s) address is linked, so a setting cannot smuggle a ``javascript:`` link onto the
    page; ids must parse as UUIDs.
    """
    from ehr_release.flows.server import UI_ENV, ui_url

    ui = ui_url() or ""
    if not ui.startswith(("http://", "https://")):
        return PrefectLinks(None, None, "Prefect UI not found: no local Prefect server of "
                            f"this home is running (`ehr-release home`) and {UI_ENV} is not "
                            "set")
    flow_run = _uuid(run.flow_run_id)
    if flow_run is None:
        return PrefectLinks(None, None, "no Prefect flow run recorded for this run")
    page = f"{ui}/runs/flow-run/{flow_run}"
    published = [e for e in events if e.action == AuditAction.RUN_PUBLISHED]
    publish_run = (_uuid(json.loads(published[-1].payload_json).get("flow_run_id"))
                   if published else None)
    return PrefectLinks(page, f"{page}?tab=Artifacts", None,
                        f"{ui}/runs/flow-run/{publish_run}" if publish_run else None)


def _uuid(text: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(text or ""))
    except ValueError:
        return None
