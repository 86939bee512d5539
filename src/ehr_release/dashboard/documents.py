"""Where a run's documents are: certificate, datasheet, and its flow run in the Prefect UI.

Why one module: the run page links each of them and the download routes serve them, and both
must agree on which file is current (the published one over the reviewer's draft).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ehr_release.datasheet import DATASHEET
from ehr_release.storage import runs
from ehr_release.storage.models import ReleaseRun

UI_ENV = "PREFECT_UI_URL"


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
    """Links to the run's release flow in the Prefect UI, or why there are none."""

    flow_run: str | None
    artifacts: str | None
    why_none: str | None


def prefect_links(run: ReleaseRun) -> PrefectLinks:
    """The flow-run page (its Artifacts tab holds each stage's artifact).

    The UI's address comes from ``PREFECT_UI_URL``; only an http(s) address is linked, so a
    setting cannot smuggle a ``javascript:`` link onto the page.
    """
    ui = os.environ.get(UI_ENV, "").strip().rstrip("/")
    if not ui.startswith(("http://", "https://")):
        return PrefectLinks(None, None, f"Prefect UI not configured (set {UI_ENV})")
    try:
        flow_run = uuid.UUID(run.flow_run_id or "")
    except ValueError:
        return PrefectLinks(None, None, "no Prefect flow run recorded for this run")
    page = f"{ui}/runs/flow-run/{flow_run}"
    return PrefectLinks(page, f"{page}?tab=Artifacts", None)
