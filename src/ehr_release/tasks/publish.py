"""Publish: atomically place an approved release under ``releases/<run_id>/``.

The published folder holds the release files, the recipient's ``datasheet.pdf`` and
``manifest.json``; the final (internal) certificate is filed in the release system's home
beside the run's work files, never in the folder that goes to the recipient.

Files are written to a staging folder beside the destination, fsynced, and renamed into
place in one step, so a reader (or a crash) sees either nothing or the complete release. The
database records the published files' hashes and the ``published`` status in one
transaction; if that fails, the renamed folder is removed again, so the disk never shows a
release the database does not know. A release that is not ``approved`` cannot be published:
the state machine refuses the transition before anything is renamed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from datetime import datetime
from pathlib import Path

from prefect import task
from sqlmodel import Session

from ehr_release.core.canonical import canonical_json
from ehr_release.core.errors import IllegalTransition
from ehr_release.core.files import check_safe_name, fsync_dir, sha256_bytes, write_durably
from ehr_release.documents.certificate import ApprovalBlock, render_certificate_pdf
from ehr_release.documents.datasheet import DATASHEET, public_parameters, render_datasheet_pdf
from ehr_release.governance.identity import same_person
from ehr_release.model.reports import ReleaseOutcome, UtilityReport, VerificationReport
from ehr_release.planning.request import DataUse
from ehr_release.registry import ReleaseFiles
from ehr_release.registry import get as get_algorithm
from ehr_release.storage import chained, runs
from ehr_release.storage.actions import AuditAction, Decision
from ehr_release.storage.audit import record_event
from ehr_release.storage.budget import run_account
from ehr_release.storage.destinations import releases_folder
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import utc_now
from ehr_release.storage.runs import Status
from ehr_release.storage.site import refuse_seed_unless_test_site
from ehr_release.tasks import render_aside
from ehr_release.tasks.artifacts import md_table, stage_artifact
from ehr_release.tasks.certify import (
    build_context,
    build_datasheet,
    draft_path,
    recorded_parameters,
)
from ehr_release.tasks.logs import plural, since, size, stage_log
from ehr_release.tasks.redaction import redacted
from ehr_release.tasks.steps import step

CERTIFICATE = "certificate.pdf"
MANIFEST = "manifest.json"


def publish_release(run_id: str, files: ReleaseFiles, verification: VerificationReport,
                    utility: UtilityReport, actor: str, outcome: ReleaseOutcome | None = None,
                    data_use: DataUse | None = None) -> Path:
    """Write, fsync and rename the release into place; record it; return its folder."""
    step("check the approval and the pinned files")
    run = runs.get_run(run_id)
    if run.status != Status.APPROVED:
        raise IllegalTransition(f"run {run_id} is {run.status}; only an approved run is "
                                "published")
    # A seeded run parked on a normal site before seeds needed a test site is not published.
    refuse_seed_unless_test_site(json.loads(run.parameters_json))
    spent = run_account(run_id)
    if spent is not None and spent.exceeded:
        raise IllegalTransition(f"run {run_id}: publishing would exceed the ε budget of its "
                                f"extract: {spent.text()}")
    if not verification.holds:
        raise IllegalTransition(f"run {run_id} failed verification; it cannot be published")
    approval = runs.get_approval(run_id)
    if approval is None or approval.decision != Decision.APPROVE:
        raise IllegalTransition(f"run {run_id} has no approving decision on record")
    _require_chained_approval(run_id, approval.reviewer)
    digests = {n: (sha256_bytes(d), len(d)) for n, d in files.items()}
    if digests != runs.pinned_candidate(run_id):
        raise IllegalTransition(f"run {run_id}: these files are not the release that was "
                                "verified and shown to the reviewer")
    final = releases_folder(run.out_dir) / check_safe_name(run_id)
    _clear_crash_leftovers(run_id, final)
    staging = final.parent / f".staging-{run_id}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        step("render the final certificate and datasheet")
        contents = {check_safe_name(n): d for n, d in files.items()}
        channel, role = runs.decision_channel(run_id)
        block = ApprovalBlock(reviewer=approval.reviewer, decision=approval.decision,
                              reason=approval.reason,
                              decided_at=datetime.fromisoformat(approval.decided_at),
                              channel=channel, role=role)
        params = recorded_parameters(run_id, files)
        ctx = build_context(run_id, files, verification, utility, params=params,
                            approval=block, outcome=outcome, data_use=data_use,
                            status="approved — published")
        aside = render_aside.begin(run_id, ctx)  # on the second CPU, if it was started
        contents[DATASHEET] = render_datasheet_pdf(build_datasheet(
            run_id, files, verification, outcome, data_use, params=params,
            approved_at=block.decided_at))
        taken = render_aside.take(run_id) if aside else None
        certificate = taken or render_certificate_pdf(ctx)
        stage_log("publish", f"final certificate {size(len(certificate))} ("
                             f"{'rendered in the second process' if taken else 'rendered here'}"
                             f"), datasheet {size(len(contents[DATASHEET]))}")
        manifest = {
            "run_id": run_id, "algorithm": run.algorithm,
            "parameters": public_parameters(json.loads(run.parameters_json),
                                            get_algorithm(run.algorithm).site_paths),
            "published_at": utc_now(), "audit_head_at_certification": ctx.audit_head,
            "approval": {"reviewer": approval.reviewer, "decision": approval.decision,
                         "decided_at": approval.decided_at},
            "files": [{"name": n, "sha256": sha256_bytes(d), "size": len(d)}
                      for n, d in sorted(contents.items())],
        }
        contents[MANIFEST] = (canonical_json(manifest) + "\n").encode()
        step("write, fsync and rename the release folder")
        for name, data in contents.items():
            write_durably(staging / name, data)
        _check_staged(run_id, staging, contents)
        fsync_dir(staging)
        os.rename(staging, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    step("file the certificate and record the publication")
    filed = draft_path(run_id, CERTIFICATE)
    write_durably(filed, certificate, private=True)
    try:
        with Session(get_engine()) as s:
            runs.add_artifacts(s, run_id, [("published", str(final / n), sha256_bytes(d),
                                            len(d)) for n, d in sorted(contents.items())])
            runs.add_artifacts(s, run_id, [("certificate", str(filed), sha256_bytes(certificate),
                                            len(certificate))])
            done = runs.apply_transition(
                s, run_id, Status.PUBLISHED, actor=actor,
                payload={"folder": final.name, "files": sorted(contents),
                         "manifest_sha256": sha256_bytes(contents[MANIFEST]),
                         "flow_run_id": _flow_run_id()})
            done.error = None  # an earlier attempt's "publication failed" is over
            s.add(done)
            s.commit()
    except BaseException:
        shutil.rmtree(final, ignore_errors=True)
        raise
    return final


def _check_staged(run_id: str, staging: Path, contents: dict[str, bytes]) -> None:
    """The staged folder must hold exactly the files written, as regular files: the
    closed world of ``ehr-release verify`` and ``audit verify`` is the folder's whole tree
    (:mod:`ehr_release.privacy.release_tree`), and so is what is renamed into place. Kinds
    only in the message: an entry's name may carry a value."""
    from ehr_release.privacy.release_tree import tree_entries

    extra = [e.kind for e in tree_entries(staging)
             if not (e.top and e.kind == "file" and e.path in contents)]
    if extra:
        raise IllegalTransition(f"run {run_id}: the staged release holds {len(extra)} "
                                f"entr{'y' if len(extra) == 1 else 'ies'} it did not write "
                                f"({', '.join(sorted(set(extra)))}); nothing was published")


def _require_chained_approval(run_id: str, reviewer: str) -> None:
    """The chain, not the editable columns, must say the run is approved, by the reviewer the
    approvals row names, who is not its requester (issue 33: a status and an approvals row
    set by hand publish nothing)."""
    fact = chained.decision_of(run_id)
    if fact.status != Status.APPROVED or fact.decision != Decision.APPROVE:
        raise IllegalTransition(f"run {run_id}: the audit chain records no approval of it "
                                f"(last recorded status: {fact.status or 'none'})")
    if fact.decider != reviewer:
        raise IllegalTransition(f"run {run_id}: the approval on record names {reviewer!r}, "
                                f"the audit chain {fact.decider!r}")
    if fact.requester is None or same_person(fact.requester, fact.decider or ""):
        raise IllegalTransition(f"run {run_id}: the audit chain shows no approval by someone "
                                "other than its requester")


def _clear_crash_leftovers(run_id: str, final: Path) -> None:
    """Remove what a publish killed midway left behind, before publishing again.

    A staging folder is never a release. A final folder of a run the database does not show
    as published was renamed into place but never recorded (killed between the rename and
    the commit): it is not a release either, and is removed with an audit event, so the
    disk never holds a release that the database — and the reviewer's decision — do not.
    """
    for stale in final.parent.glob(f".staging-{run_id}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if final.exists():
        manifest = final / MANIFEST
        ours = manifest.exists() and json.loads(manifest.read_text()).get("run_id") == run_id
        if not ours:
            raise IllegalTransition(f"release folder {final} exists and is not this run's; "
                                    "refusing to overwrite")
        shutil.rmtree(final)
        fsync_dir(final.parent)
        record_event(actor="system:publish", action=AuditAction.PUBLISH_ORPHAN_REMOVED,
                     run_id=run_id, payload={"folder": final.name})


def _flow_run_id() -> str | None:
    """The publishing flow run's id (the dashboard links it), None outside a flow."""
    from prefect.runtime import flow_run

    found = flow_run.get_id()
    return str(found) if found else None


@task(name="publish", task_run_name="publish[{run_id}]", persist_result=False,
      cache_policy=None)
@redacted
def publish_task(run_id: str, files: ReleaseFiles, verification: VerificationReport,
                 utility: UtilityReport, actor: str, outcome: ReleaseOutcome | None = None,
                 data_use: DataUse | None = None) -> str:
    started = time.perf_counter()
    folder = publish_release(run_id, files, verification, utility, actor, outcome, data_use)
    placed = sorted(folder.iterdir())
    stage_artifact("publish", run_id, f"Published to `{folder.name}`\n\n" + md_table(
        [(p.name, f"{p.stat().st_size:,}") for p in placed], ("file", "bytes")))
    stage_log("publish", f"{plural(len(placed), 'file')} "
                         f"({size(sum(p.stat().st_size for p in placed))}: release, datasheet, "
                         f"manifest) placed in one rename and recorded in {since(started)}")
    return str(folder)
