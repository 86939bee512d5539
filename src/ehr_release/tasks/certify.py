"""Certificate and datasheet: built from recorded facts only.

The certificate (internal) is what a privacy officer reads and signs; the datasheet is what
the recipient gets with the data (:mod:`ehr_release.documents.datasheet`). Both are rendered as
drafts
before the decision, so the reviewer sees exactly what will leave.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from prefect import task

from ehr_release.core.files import sha256_bytes, write_durably
from ehr_release.documents.certificate import (
    CODES_COLUMN,
    ApprovalBlock,
    CertificateContext,
    render_certificate_pdf,
)
from ehr_release.documents.datasheet import (
    DatasheetContext,
    describe_files,
    public_parameters,
    render_datasheet_pdf,
)
from ehr_release.documents.plain import (
    attack_statement,
    code_edition,
    code_mapping_words,
    verification_limits,
)
from ehr_release.history.checks import HISTORY
from ehr_release.model.dataset import CODE_MAPPING
from ehr_release.model.reports import ReleaseOutcome, UtilityReport, VerificationReport
from ehr_release.planning.plan import ReleasePlan
from ehr_release.planning.request import DataUse, ReleaseRequest
from ehr_release.privacy.closed_world import ReleaseSchema
from ehr_release.registry import AlgorithmEntry, ReleaseFiles
from ehr_release.registry import get as get_algorithm
from ehr_release.release import bundle
from ehr_release.storage import chained, runs
from ehr_release.storage.audit import chain_head
from ehr_release.storage.budget import run_account, show_epsilon
from ehr_release.storage.engine import home
from ehr_release.storage.home import private_dir
from ehr_release.storage.site import is_test_site
from ehr_release.tasks.artifacts import stage_artifact
from ehr_release.tasks.aside import begin_certificate, take_certificate
from ehr_release.tasks.logs import since, size, stage_log
from ehr_release.tasks.naming import stage_run_name
from ehr_release.tasks.redaction import redacted
from ehr_release.tasks.retry import is_transient

#: Bytes of a JSON or JSON Lines file scanned for field names: names repeat (every record
#: has the same fields), values are never kept, and a large release is not parsed whole.
SCAN_BYTES = 1 << 20
#: An object key in JSON text: a string followed by a colon (a string value never is).
_JSON_KEY = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:')


def _names_in(name: str, data: bytes) -> set[str]:
    """Column headers of a table, or object keys of a JSON / JSON Lines file."""
    with suppress(Exception):
        if name.endswith(".csv"):
            import pandas as pd

            return set(pd.read_csv(io.BytesIO(data), nrows=0).columns.astype(str))
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq

            return set(pq.read_schema(io.BytesIO(data)).names)
        if name.endswith((".json", ".jsonl")):
            return {json.loads(b'"' + key + b'"')
                    for key in _JSON_KEY.findall(data[:SCAN_BYTES])}
    return set()


def released_columns(files: Mapping[str, bytes], source: list[str],
                     schema: ReleaseSchema | None = None) -> dict[str, list[str]]:
    """For each released file, the source columns that appear in it by name.

    Only names of the source's own columns are returned (in the source's order); whatever
    else the scan meets (a code used as a key, say) is dropped on the spot. A table whose
    declaration names the column that carries the diagnosis codes in its own form
    (``codes_column``: ``code``, ``generalized_codes``) counts as releasing the source's
    codes column.
    """
    declared = {f.name: f for f in (schema.files if schema else ())}
    out = {}
    for name, data in sorted(files.items()):
        found = _names_in(name, data)
        spec = declared.get(name)
        if spec is not None and spec.codes_column in found:
            found = found | {CODES_COLUMN}
        out[name] = [c for c in source if c in found]
    return out


def effective_parameters(params: dict[str, Any], files: Mapping[str, bytes]) -> dict[str, Any]:
    """The parameters as validated, with a default the release itself resolved filled in.

    DiffGen's ``class_column`` defaults to the configuration's class attribute (the one the
    request's ``--class-column`` names for a shipped configuration); parsing leaves it None,
    which the certificate used to print as "not set" although the run had one. The column
    actually used is in the released ``cut.json`` (public: ``class.column``).
    """
    if "class_column" not in params or params["class_column"] is not None:
        return params
    for name, data in sorted(files.items()):
        if name.endswith(".json"):
            with suppress(Exception):
                column = json.loads(data)["class"]["column"]
                if isinstance(column, str) and column:
                    return {**params, "class_column": f"{column} (the configuration's)"}
    return params


def parameter_help(entry: AlgorithmEntry) -> dict[str, str]:
    """Each declared parameter's meaning, printed beside its value."""
    return {p.name: p.help for p in entry.params}


def _pinned_digests(run_id: str, files: ReleaseFiles) -> dict[str, tuple[str, int]] | None:
    """The run's pinned hashes when they cover exactly these files (else None: hash them).

    The candidate is pinned right after anonymization and publishing refuses any byte that
    differs from it, so the certificate and datasheet can name these hashes without hashing
    a release of gigabytes again for each document.
    """
    pinned = runs.pinned_candidate(run_id)
    if set(pinned) != set(files) or any(pinned[n][1] != len(d) for n, d in files.items()):
        return None
    return pinned


def recorded_parameters(run_id: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    """The run's parameters as validated, read back from its record — for the publishing
    flow, which starts days later in another process (the release flow has its plan)."""
    run = runs.get_run(run_id)
    parsed = get_algorithm(run.algorithm).parse(json.loads(run.parameters_json))
    return effective_parameters(parsed, files)


def build_context(run_id: str, files: ReleaseFiles, verification: VerificationReport,
                  utility: UtilityReport, *, params: Mapping[str, Any], status: str,
                  outcome: ReleaseOutcome | None = None, data_use: DataUse | None = None,
                  approval: ApprovalBlock | None = None) -> CertificateContext:
    """Gather the certificate's facts from the database and the stage results.

    ``params`` are the effective parameters (:func:`effective_parameters`). The reports are
    their stored copies (``stored()``): the certificate is a file, and holds no data value.
    """
    run = runs.get_run(run_id)
    dataset = runs.get_dataset(run.dataset_id)
    entry = get_algorithm(run.algorithm)
    schema: dict[str, str] = json.loads(dataset.columns_json)
    head, count = chain_head()
    released = describe_files(files, entry.schema, _pinned_digests(run_id, files))
    return CertificateContext(
        run_id=run_id, created_at=datetime.fromisoformat(run.created_at),
        requester=chained.requester(run_id) or run.requester,
        dataset_source=Path(dataset.source).name or dataset.source,
        dataset_fingerprint=dataset.fingerprint, dataset_rows=dataset.rows,
        dataset_schema=schema, algorithm=entry.name,
        algorithm_summary=entry.summary, privacy_model=entry.privacy_model,
        parameters=dict(params), verification=verification.stored(), utility=utility,
        manifest=[(f.name, f.sha256, f.size) for f in released],
        approval=approval, audit_head=head, audit_events=count, status=status,
        outcome=None if outcome is None else outcome.stored(), data_use=data_use or DataUse(),
        destination=f"{run.out_dir}/releases/{run_id}",
        released=released,
        released_columns=released_columns(files, [c for c in schema if c != CODE_MAPPING],
                                          entry.schema),
        parameter_help=parameter_help(entry), headline_loss=entry.headline_loss,
        epsilon_account=_epsilon_account(run_id), test_site=is_test_site())


def _epsilon_account(run_id: str) -> str | None:
    """The extract's ε account for a DP run (:mod:`ehr_release.storage.budget`), in words."""
    spent = run_account(run_id)
    return None if spent is None else spent.text()


def build_datasheet(run_id: str, files: ReleaseFiles, verification: VerificationReport,
                    outcome: ReleaseOutcome | None, data_use: DataUse | None, *,
                    params: Mapping[str, Any],
                    approved_at: datetime | None = None) -> DatasheetContext:
    """The recipient's datasheet: public facts only (see :mod:`ehr_release.documents.datasheet`)."""
    run = runs.get_run(run_id)
    entry = get_algorithm(run.algorithm)
    head, _ = chain_head()
    attack = outcome.attack if outcome else None
    schema = json.loads(runs.get_dataset(run.dataset_id).columns_json)
    return DatasheetContext(
        run_id=run_id, algorithm=entry.name, privacy_model=entry.privacy_model,
        parameters=public_parameters(dict(params), entry.site_paths),
        files=describe_files(files, entry.schema, _pinned_digests(run_id, files)),
        records=outcome.records if outcome else None,
        checks_passed=[r.name for r in verification.requirements if r.passed],
        attacker_model=attack.attacker_model if attack and attack.passed else None,
        data_use=data_use or DataUse(), approved_at=approved_at, audit_head=head,
        parameter_help=parameter_help(entry), seeded=params.get("seed") is not None,
        attack_statement=None if attack is None or not attack.passed else attack_statement(
            attack.attacker_model, attack.required,
            verification_limits(entry.name) is None),
        verification_limits=verification_limits(entry.name),
        history=history_words(verification), cumulative_epsilon=_cumulative_epsilon(run_id),
        test_site=is_test_site(),
        code_system=code_edition(schema),
        code_mapping=code_mapping_words(schema, losses=False))


def history_words(verification: VerificationReport) -> str | None:
    """The history requirement's measured words (stored copy: run ids, parameters, counts)."""
    found = [r for r in verification.stored().requirements if r.name == HISTORY]
    return found[0].measured if found and found[0].passed else None


def _cumulative_epsilon(run_id: str) -> str | None:
    """For the recipient: this release's ε and the bound on what its patients carry.

    The datasheet is public and, under ε-DP, holds nothing computed on the true data: the
    most ε any patient actually carries depends on which patients earlier extracts held,
    so it stays on the internal certificate (the account). The recipient gets the site's
    per-patient total instead, which every draw was checked against before it was made.
    """
    spent = run_account(run_id)
    if spent is None:
        return None
    return (f"This release spends ε = {show_epsilon(spent.this_run)}. The site caps the ε "
            f"any one patient accumulates over every differentially private release that "
            f"held them at ε = {show_epsilon(spent.total or 0)}, checked before this release "
            "was drawn: the guarantee for what all those releases reveal together is at most "
            "that total, not this release's ε alone.")


def draft_path(run_id: str, name: str = "certificate-draft.pdf") -> Path:
    """Working copies the reviewer reads before deciding (never published as they are)."""
    return private_dir(home() / "runs" / run_id) / name


@task(name="certify", task_run_name=stage_run_name("certify"), retries=2,
      retry_delay_seconds=1, retry_condition_fn=is_transient, cache_policy=None,
      persist_result=False)
@redacted
def certify_task(plan: ReleasePlan, files: ReleaseFiles, verification: VerificationReport,
                 utility: UtilityReport, outcome: ReleaseOutcome | None = None) -> str:
    """Render the draft certificate and draft datasheet (approval pending); record both.

    The certificate may be rendered in the flow's second process while the datasheet is
    rendered here (:mod:`ehr_release.tasks.aside`): the same context, the same bytes.
    """
    run_id, data_use = plan.run_id, plan.request.data_use
    started = time.perf_counter()
    params = effective_parameters(dict(plan.params), files)
    ctx = build_context(run_id, files, verification, utility, params=params, outcome=outcome,
                        data_use=data_use, status="verified — awaiting reviewer decision")
    aside = begin_certificate(run_id, ctx)  # rendered on the second CPU, if there is one
    sheet = render_datasheet_pdf(build_datasheet(run_id, files, verification, outcome,
                                                 data_use, params=params))
    pdf = (take_certificate(run_id) if aside else None) or render_certificate_pdf(ctx)
    path = draft_path(run_id)
    write_durably(path, pdf, private=True)
    sheet_path = draft_path(run_id, "datasheet-draft.pdf")
    write_durably(sheet_path, sheet, private=True)
    runs.record_artifacts(run_id, [
        ("certificate-draft", str(path), sha256_bytes(pdf), len(pdf)),
        ("datasheet-draft", str(sheet_path), sha256_bytes(sheet), len(sheet))])
    stage_artifact("certificate", run_id,
                   f"Draft certificate rendered ({len(pdf):,} bytes), SHA-256 "
                   f"`{sha256_bytes(pdf)}`; draft datasheet {len(sheet):,} bytes. "
                   f"Audit head `{ctx.audit_head[:16]}…`.")
    stage_log("certify", f"draft certificate {size(len(pdf))} "
                         f"({'rendered in the second process' if aside else 'rendered here'}), "
                         f"draft datasheet {size(len(sheet))}, in {since(started)}")
    return str(path)


@task(name="park", task_run_name="park-for-review", retries=2, retry_delay_seconds=1,
      retry_condition_fn=is_transient, cache_policy=None, persist_result=False)
@redacted
def park_task(run_id: str, files: ReleaseFiles, verification: VerificationReport,
              utility: UtilityReport, outcome: ReleaseOutcome,
              request: ReleaseRequest) -> None:
    """Persist what publishing needs, so the run can await its reviewer with no process."""
    bundle.park(run_id, files, verification, utility, outcome, request.data_use,
                request.approval_timeout_s)
    stage_artifact("awaiting-approval", run_id,
                   "Release parked for the reviewer: candidate files and reports persisted; "
                   "no process waits. A recorded decision starts `publish_flow`.")
    stage_log("park", f"{len(files)} candidate file(s) and the reports persisted; the run "
                      "awaits a reviewer's decision, with no process waiting")
