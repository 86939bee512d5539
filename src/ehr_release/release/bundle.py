"""A certified run's publication bundle, written when the release flow ends and read back by
the publishing flow — possibly days later, in another process.

Files go to ``<home>/runs/<run_id>/candidate/`` (mode 0600 in a 0700 home; their hashes are
already pinned in the database, and publishing refuses any byte that differs). The reports
the final certificate and datasheet are rendered from go to the ``pending_releases`` table as
JSON, charts included (base64), so nothing has to be recomputed on the patient data to
publish.
"""

from __future__ import annotations

import base64
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ehr_release.core.canonical import canonical_json
from ehr_release.core.errors import EhrReleaseError
from ehr_release.core.files import check_safe_name, fsync_dir, write_durably
from ehr_release.model.reports import (
    AttackReport,
    Chart,
    ReleaseOutcome,
    Requirement,
    UtilityReport,
    VerificationReport,
)
from ehr_release.planning.request import DataUse
from ehr_release.registry import ReleaseFiles
from ehr_release.storage import pending
from ehr_release.storage.engine import home
from ehr_release.storage.home import private_dir


@dataclass(frozen=True)
class Bundle:
    """Everything :func:`~ehr_release.tasks.publish.publish_release` needs."""

    files: ReleaseFiles
    verification: VerificationReport
    utility: UtilityReport
    outcome: ReleaseOutcome
    data_use: DataUse


def candidate_dir(run_id: str) -> Path:
    return home() / "runs" / check_safe_name(run_id) / "candidate"


def stage_cache_dir(run_id: str) -> Path:
    """Where Prefect keeps this run's cached anonymization (for a resume), beside the
    candidate and removed with it: an unverified candidate must not outlive its run in
    Prefect's shared result storage."""
    return home() / "runs" / check_safe_name(run_id) / "stage-cache"


def _utility_to_dict(report: UtilityReport) -> dict[str, Any]:
    return {**report.to_dict(), "charts": [
        {"name": c.name, "caption": c.caption, "png": base64.b64encode(c.png).decode()}
        for c in report.charts]}


def _utility_from_dict(d: dict[str, Any]) -> UtilityReport:
    return UtilityReport(d["algorithm"], d["metrics"], tables=d.get("tables", {}),
                         charts=[Chart(c["name"], c["caption"], base64.b64decode(c["png"]))
                                 for c in d.get("charts", [])],
                         notes=d.get("notes", []), below_baseline=d.get("below_baseline", []))


def _verification_from_dict(d: dict[str, Any]) -> VerificationReport:
    return VerificationReport(d["algorithm"], [Requirement(**r) for r in d["requirements"]])


def _outcome_to_dict(outcome: ReleaseOutcome) -> dict[str, Any]:
    return {"records": outcome.records, "waivers": outcome.waivers,
            "attack": None if outcome.attack is None else outcome.attack.to_dict()}


def _outcome_from_dict(d: dict[str, Any]) -> ReleaseOutcome:
    attack = None if d["attack"] is None else AttackReport(**d["attack"])
    return ReleaseOutcome(records=d["records"], attack=attack, waivers=list(d["waivers"]))


def park(run_id: str, files: ReleaseFiles, verification: VerificationReport,
         utility: UtilityReport, outcome: ReleaseOutcome, data_use: DataUse,
         approval_timeout_s: int | None) -> None:
    """Persist the bundle; after this the run needs no process until a decision arrives.

    ``approval_timeout_s`` None: the site's approval window, read here, when the run is
    parked, whichever process (CLI, deployment) started it."""
    folder = private_dir(candidate_dir(run_id))
    for name, data in files.items():
        write_durably(folder / check_safe_name(name), data, private=True)
    fsync_dir(folder)
    existing = pending.get_pending(run_id)
    pending.save_pending(pending.PendingRelease(
        run_id=run_id, candidate_dir=str(folder),
        # Stored copies (reports.py): the reviewer's dashboard and the final certificate
        # read these tables, which hold no value of the data.
        verification_json=canonical_json(verification.stored().to_dict()),
        utility_json=canonical_json(_utility_to_dict(utility)),
        outcome_json=canonical_json(_outcome_to_dict(outcome.stored())),
        data_use_json=canonical_json(asdict(data_use)),
        # A resumed run keeps the window it was given, not a fresh one.
        expires_at=existing.expires_at if existing else pending.expiry(
            approval_timeout_s or _site_window())))


def _site_window() -> int:
    from ehr_release.storage.site_settings import approval_window_s

    return approval_window_s()


def load(run_id: str, pinned: dict[str, tuple[str, int]]) -> Bundle:
    """Read the bundle back; only the pinned file names are read, and nothing else counts."""
    row = pending.get_pending(run_id)
    if row is None:
        raise EhrReleaseError(f"run {run_id} has no persisted release awaiting publication "
                              f"(was it certified? resume it with `ehr-release resume "
                              f"{run_id}`)")
    folder = Path(row.candidate_dir)
    try:
        files = {name: (folder / check_safe_name(name)).read_bytes() for name in pinned}
    except OSError as exc:
        raise EhrReleaseError(f"run {run_id}: a candidate file is missing from {folder} "
                              f"({exc.strerror}); restore it (only the pinned bytes are "
                              f"published), then `ehr-release publish {run_id}`") from None
    return Bundle(files=files,
                  verification=_verification_from_dict(json.loads(row.verification_json)),
                  utility=_utility_from_dict(json.loads(row.utility_json)),
                  outcome=_outcome_from_dict(json.loads(row.outcome_json)),
                  data_use=DataUse(**json.loads(row.data_use_json)))


def discard(run_id: str) -> None:
    """Remove the candidate copies (the parked bundle's files and the cached anonymization)
    once the run has ended: published, rejected, expired or failed."""
    shutil.rmtree(candidate_dir(run_id), ignore_errors=True)
    shutil.rmtree(stage_cache_dir(run_id), ignore_errors=True)
