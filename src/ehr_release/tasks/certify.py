"""Certificate: a PDF a privacy officer can read and sign, built from recorded facts only."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from prefect import task

from ehr_release.certificate import ApprovalBlock, CertificateContext, render_certificate_pdf
from ehr_release.files import sha256_bytes, write_durably
from ehr_release.registry import ReleaseFiles
from ehr_release.registry import get as get_algorithm
from ehr_release.reports import UtilityReport, VerificationReport
from ehr_release.storage import runs
from ehr_release.storage.audit import chain_head
from ehr_release.storage.engine import home
from ehr_release.tasks.artifacts import stage_artifact
from ehr_release.tasks.retry import is_transient


def build_context(run_id: str, files: ReleaseFiles, verification: VerificationReport,
                  utility: UtilityReport, *, status: str,
                  approval: ApprovalBlock | None = None) -> CertificateContext:
    """Gather the certificate's facts from the database and the stage results."""
    run = runs.get_run(run_id)
    dataset = runs.get_dataset(run.dataset_id)
    entry = get_algorithm(run.algorithm)
    params: dict[str, Any] = entry.parse(json.loads(run.parameters_json))
    head, count = chain_head()
    return CertificateContext(
        run_id=run_id, created_at=datetime.fromisoformat(run.created_at),
        requester=run.requester, dataset_source=Path(dataset.source).name or dataset.source,
        dataset_fingerprint=dataset.fingerprint, dataset_rows=dataset.rows,
        dataset_schema=json.loads(dataset.columns_json), algorithm=entry.name,
        algorithm_summary=entry.summary, privacy_model=entry.privacy_model,
        parameters=params, verification=verification, utility=utility,
        manifest=[(name, sha256_bytes(data), len(data)) for name, data in sorted(files.items())],
        approval=approval, audit_head=head, audit_events=count, status=status)


def draft_path(run_id: str) -> Path:
    """Working copy of the certificate a reviewer reads before deciding (never published)."""
    folder = home() / "runs" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "certificate-draft.pdf"


@task(name="certify", retries=2, retry_delay_seconds=1, retry_condition_fn=is_transient,
      cache_policy=None, persist_result=False)
def certify_task(run_id: str, files: ReleaseFiles, verification: VerificationReport,
                 utility: UtilityReport) -> str:
    """Render the draft certificate (approval pending) and record it as an artifact."""
    ctx = build_context(run_id, files, verification, utility,
                        status="verified — awaiting reviewer decision")
    pdf = render_certificate_pdf(ctx)
    path = draft_path(run_id)
    write_durably(path, pdf)
    runs.record_artifacts(run_id, [("certificate-draft", str(path), sha256_bytes(pdf),
                                    len(pdf))])
    stage_artifact("certificate", run_id,
                   f"Draft certificate rendered ({len(pdf):,} bytes), SHA-256 "
                   f"`{sha256_bytes(pdf)}`. Audit head `{ctx.audit_head[:16]}…`.")
    return str(path)
