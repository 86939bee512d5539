"""Starting work: a release (`run`), a comparison of candidates (`compare`), and restarting a
run whose flow died (`resume`).

Each refuses a bad parameter or file before SQLAlchemy or Prefect is imported: the flow
process imports Prefect, started while `run` still reads the input
(:mod:`ehr_release.flows.launch`). Progress goes to stderr; stdout's last line is what
scripts read.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from ehr_release.commands.common import ParamOpt, RunnerOpt, fail, full_run_id, identity
from ehr_release.core.errors import EhrReleaseError
from ehr_release.storage.actions import DEFAULT_APPROVAL_TIMEOUT_S


def run(
    input: Annotated[Path, typer.Option(help="Patients file (CSV/Parquet) or MIMIC folder.")],
    requester: Annotated[str, typer.Option(help="Who requests this release.")],
    out: Annotated[Path | None, typer.Option(
        help="Folder under which releases/<run_id>/ appears; it must lie under the releases "
             "root (EHR_RELEASE_RELEASES_ROOT, default <home>/releases), which is the "
             "default.")] = None,
    algorithm: Annotated[str | None, typer.Option(help="Algorithm name (see `algorithms`).")]
    = None,
    param: ParamOpt = None,
    from_comparison: Annotated[Path | None, typer.Option(
        help="A comparison folder: take algorithm and parameters from one of its rows.")]
    = None,
    row: Annotated[int | None, typer.Option(help="The row of --from-comparison.")] = None,
    diagnoses: Annotated[Path | None, typer.Option(help="Long diagnoses table.")] = None,
    admissions: Annotated[Path | None, typer.Option(help="Admissions table (ages).")] = None,
    class_column: Annotated[str | None, typer.Option(help="Class column name.")] = None,
    approve_as: Annotated[str | None, typer.Option(help="Reviewer deciding right away.")]
    = None,
    reason: Annotated[str | None, typer.Option(help="Reason for --approve-as.")] = None,
    approval_timeout: Annotated[int | None, typer.Option(
        help="Seconds the reviewer has to decide; after that the run is rejected. Default: "
             "the site's approval window (`ehr-release policy approval-window`, "
             f"{DEFAULT_APPROVAL_TIMEOUT_S // 86400} days unless changed).")] = None,
    wait_timeout: Annotated[int, typer.Option(help="Seconds this command waits for the "
                                                   "pipeline.")] = 3600,
    task_runner: RunnerOpt = "threads",
    recipient: Annotated[str | None, typer.Option(
        help="Who receives the data (printed on the certificate and the datasheet).")] = None,
    purpose: Annotated[str | None, typer.Option(help="What the data is for.")] = None,
    terms: Annotated[str | None, typer.Option(help="Data-use terms the recipient accepts.")]
    = None,
    expires: Annotated[str | None, typer.Option(
        help="ISO date YYYY-MM-DD by which the recipient must delete the data.")] = None,
    allow_empty: Annotated[bool, typer.Option(
        help="Let a release with no patient records through (else it is refused).")] = False,
    allow_low_utility: Annotated[bool, typer.Option(
        help="Let a release whose utility is below a trivial baseline through.")] = False,
    source: Annotated[str, typer.Option(
        help="Registered source (population) the extract is drawn from.")] = "default",
    code_system: Annotated[str | None, typer.Option(
        help="Diagnosis codes: icd9 or icd10 (default: detected from the codes).")] = None,
    code_mapping: Annotated[str | None, typer.Option(
        help="gem: map ICD-9-CM codes to ICD-10-CM with the CMS GEMs (for an extract that "
             "mixes them); the certificate reports the losses.")] = None,
) -> None:
    """Start a release; prints the run id. Stops at awaiting_approval unless --approve-as.

    Once users are registered the requester must be a steward and give their credential
    (EHR_RELEASE_CREDENTIAL, else a prompt); --approve-as needs a reviewer's
    (EHR_RELEASE_REVIEWER_CREDENTIAL, else a prompt).
    """
    from ehr_release.parameters.params import parse_assignments

    try:
        if approve_as is not None and not (reason or "").strip():
            raise EhrReleaseError("--approve-as needs --reason")
        algorithm, params, fingerprint = _chosen_algorithm(
            algorithm, parse_assignments(param or []), from_comparison, row)
    except EhrReleaseError as exc:
        raise _refused(requester, input, exc) from None
    _refuse_bad_input(requester, algorithm, params, input, diagnoses, admissions, class_column,
                      code_system, code_mapping)

    from ehr_release.flows.spawn import call_off, spawn_flow
    from ehr_release.storage.run_folder import hand_request
    from ehr_release.storage.run_id import new_run_id

    # The flow process imports Prefect and the stages (seconds) while this one loads its
    # database layer, checks who asks and where to, and reads the input in full; it waits
    # for the request, written once those checks pass, and is called off if one refuses.
    run_id, started = new_run_id(), time.monotonic()
    flow = spawn_flow(run_id)
    try:
        from ehr_release import service
        from ehr_release.governance.identity import REVIEWER_CREDENTIAL_ENV
        from ehr_release.planning.request import check_data_use_policy
        from ehr_release.storage.actions import Decision
        from ehr_release.storage.destinations import DestinationError
        from ehr_release.storage.runs import Status

        try:
            requester = identity(requester, "steward").name
            reviewer = (identity(approve_as, "reviewer", REVIEWER_CREDENTIAL_ENV)
                        if approve_as is not None else None)
            try:
                request = service.request_from_cli(
                    run_id=run_id, input_path=input, diagnoses=diagnoses,
                    admissions=admissions, class_column=class_column, algorithm=algorithm,
                    params=params, requester=requester, out_dir=out,
                    approval_timeout_s=approval_timeout, expected_fingerprint=fingerprint,
                    task_runner=task_runner, recipient=recipient, purpose=purpose,
                    terms=terms, expires=expires, allow_empty=allow_empty,
                    allow_low_utility=allow_low_utility, source=source,
                    code_system=code_system, code_mapping=code_mapping,
                ).with_comparison(from_comparison, row)
            except DestinationError as refused:  # a path out of the root, or a file: audited
                service.record_refusal(requester, run_id, str(input), refused)
                raise
            check_data_use_policy(request)  # the site may require recipient, terms, expiry
            if approve_as is not None:
                service.refuse_self_approval(request, approve_as)
            hand_request(request)
            from ehr_release.registry.warm_up import announce_compile

            announce_compile(algorithm, lambda text: typer.echo(f"note: {text}", err=True))
            service.precheck(request, register=True, preflighted=True)
        except BaseException:
            call_off(flow, run_id)
            raise
        from ehr_release.cli_support.progress import StageProgress

        with StageProgress(request.run_id, records=_records_of(request.run_id),
                           started=started) as shown:
            shown(Status.REQUESTED)
            with shown.step("Prefect server"):  # what is left of the flow's start-up
                service.wait_until_ready(flow)
            status = service.start_release(request, wait_timeout_s=wait_timeout,
                                           on_status=shown, process=flow)
        typer.echo(f"run {request.run_id}: {status}", err=True)
        if status == Status.AWAITING_APPROVAL and reviewer is not None:
            status = service.decide(request.run_id, reviewer=reviewer.name,
                                    decision=Decision.APPROVE, reason=reason or "",
                                    channel=reviewer.channel, role=reviewer.role)
            typer.echo(f"run {request.run_id}: {status}", err=True)
    except (EhrReleaseError, TimeoutError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    if status == Status.FAILED:
        _tell_failure(request.run_id, flow)
    typer.echo(request.run_id)
    if status in {Status.FAILED, Status.REJECTED}:
        raise typer.Exit(code=1)



def _tell_failure(run_id: str, flow: subprocess.Popen[bytes]) -> None:
    """One ``error:`` line for a run that failed: the flow's full explanation when it sent
    one (it may quote the data: this terminal only), else the run's stored error."""
    from ehr_release import service
    from ehr_release.storage import runs

    why = service.failure_explanation(flow)
    typer.echo(f"error: {why or runs.get_run(run_id).error}", err=True)



def _refuse_bad_input(requester: str, algorithm: str, params: dict[str, str], input: Path,
                      diagnoses: Path | None, admissions: Path | None,
                      class_column: str | None, code_system: str | None = None,
                      code_mapping: str | None = None) -> None:
    """Refuse a bad parameter or file before the database, Prefect or pandas is imported.

    The checks (the registry's parameter declarations, the standard-library preflight) are
    the ones ``service.precheck`` starts with, so the error is the very same; it is shown
    at once and only then audited: authenticating the requester and writing the audit
    event need SQLAlchemy, whose import alone is ~0.4 s of CPU. A requester who cannot be
    authenticated gets the authentication error afterwards (audited as such, as before).
    """
    from ehr_release.ingest.preflight import preflight
    from ehr_release.registry import get as get_algorithm

    try:
        get_algorithm(algorithm).parse(params)
        preflight(input, diagnoses, admissions_path=admissions, class_column=class_column,
                  code_system=code_system, code_mapping=code_mapping)
    except EhrReleaseError as refused:
        raise _refused(requester, input, refused) from None



def _refused(requester: str, input: Path, refused: EhrReleaseError) -> typer.Exit:
    """Show a refused request at once, then audit it (``ingest.rejected``) under the
    authenticated requester; the exit to raise."""
    typer.echo(f"error: {refused}", err=True)
    sys.stderr.flush()
    from ehr_release import service
    from ehr_release.storage.runs import new_run_id

    try:
        who = identity(requester, "steward").name
    except EhrReleaseError as exc:
        return fail(str(exc))
    service.record_refusal(who, new_run_id(), str(input), refused)
    return typer.Exit(code=1)



def _chosen_algorithm(algorithm: str | None, params: dict[str, str],
                      comparison: Path | None, row: int | None
                      ) -> tuple[str, dict[str, str], str | None]:
    """Algorithm and parameters from the options, or from one row of a comparison."""
    if comparison is None:
        if algorithm is None:
            raise EhrReleaseError("give --algorithm (or --from-comparison DIR --row N)")
        if row is not None:
            raise EhrReleaseError("--row needs --from-comparison")
        return algorithm, params, None
    if algorithm is not None or params:
        raise EhrReleaseError("--from-comparison fixes algorithm and parameters; "
                              "do not also give --algorithm or --param")
    if row is None:
        raise EhrReleaseError("--from-comparison needs --row N")
    from ehr_release.comparison.comparison_file import load_comparison_row  # no Prefect import

    return load_comparison_row(str(comparison), row)



def _records_of(run_id: str) -> int | None:
    """How many patient records the registered run's dataset holds (for the progress)."""
    from ehr_release.storage import runs

    try:
        return runs.get_dataset(runs.get_run(run_id).dataset_id).rows
    except EhrReleaseError:
        return None



def compare(
    input: Annotated[Path, typer.Option(help="Patients file (CSV/Parquet) or MIMIC folder.")],
    algorithm: Annotated[list[str], typer.Option(help="Algorithm to compare (repeatable).")],
    requester: Annotated[str, typer.Option(help="Who asks for the comparison.")],
    out: Annotated[Path, typer.Option(help="Folder under which comparisons/<id>/ appears.")],
    param: ParamOpt = None,
    param_grid: Annotated[list[str] | None, typer.Option(
        help="Grid NAME=V1,V2,... (repeatable), e.g. --param-grid k=5,10,25.")] = None,
    require: Annotated[list[str] | None, typer.Option(
        help="Requirement on a parameter (repeatable), e.g. --require 'k>=10'.")] = None,
    max_loss: Annotated[float | None, typer.Option(help="Highest acceptable loss.")] = None,
    metric: Annotated[str | None, typer.Option(
        help="Loss metric to rank by (default: each algorithm's headline loss).")] = None,
    diagnoses: Annotated[Path | None, typer.Option(help="Long diagnoses table.")] = None,
    admissions: Annotated[Path | None, typer.Option(help="Admissions table (ages).")] = None,
    class_column: Annotated[str | None, typer.Option(help="Class column name.")] = None,
    task_runner: RunnerOpt = "threads",
    source: Annotated[str, typer.Option(
        help="Registered source (population) the extract is drawn from.")] = "default",
    code_system: Annotated[str | None, typer.Option(
        help="Diagnosis codes: icd9 or icd10 (default: detected from the codes).")] = None,
    code_mapping: Annotated[str | None, typer.Option(
        help="gem: map ICD-9-CM codes to ICD-10-CM with the CMS GEMs (for an extract that "
             "mixes them); a release from a row must give it too.")] = None,
) -> None:
    """Anonymize one dataset with several algorithms and parameters; recommend one.

    Writes OUT/comparisons/<id>/comparison.{json,html,pdf}; prints the folder.
    """
    import secrets

    from pydantic import ValidationError

    from ehr_release import service
    from ehr_release.comparison.compare import parse_grid
    from ehr_release.parameters.params import parse_assignments
    from ehr_release.planning.request import ComparisonRequest, check_runner_spec
    from ehr_release.storage.destinations import resolve_destination

    comparison_id = "cmp-" + secrets.token_hex(16)
    try:
        try:
            request = ComparisonRequest(
                comparison_id=comparison_id, input_path=str(input),
                diagnoses_path=str(diagnoses) if diagnoses else None,
                admissions_path=str(admissions) if admissions else None,
                class_column=class_column, algorithms=algorithm,
                params=parse_assignments(param or []), grid=parse_grid(param_grid or []),
                requirements=list(require or []), max_loss=max_loss, metric=metric,
                requester=requester, out_dir=str(resolve_destination(out)),
                task_runner=check_runner_spec(task_runner), source=source,
                code_system=code_system, code_mapping=code_mapping)
            candidates = service.comparison_candidates(request)
        except EhrReleaseError as refused:  # audited like a refused run request
            service.record_refusal(requester, comparison_id, str(input), refused)
            raise
        from ehr_release.cli_support.progress import CompareProgress

        with CompareProgress(len(candidates)) as shown:
            report = service.start_comparison(request, on_candidate=shown)
    except ValidationError as exc:
        raise fail(f"invalid comparison request: {exc.errors()[0]['loc']}: "
                    f"{exc.errors()[0]['msg']}") from None
    except EhrReleaseError as exc:
        raise fail(str(exc)) from None
    best = report["recommended_row"]
    typer.echo(f"recommended row: {best}" if best is not None
               else "no candidate verified and met the requirements", err=True)
    typer.echo(str(request.folder))



def resume(
    run_id: Annotated[str, typer.Argument(help="A run whose flow process stopped (or a "
                                               "unique start of its id).",
                                          callback=full_run_id)],
    wait_timeout: Annotated[int, typer.Option(help="Seconds to wait.")] = 3600,
) -> None:
    """Restart a run whose flow died (crash, reboot); finished stages come from the cache."""
    from ehr_release import service
    from ehr_release.cli_support.progress import StageProgress
    from ehr_release.storage import runs
    from ehr_release.storage.runs import Status

    try:
        run = runs.get_run(run_id)
        with StageProgress(run_id, records=_records_of(run_id)) as shown:
            shown.resumed_from(Status(run.status))
            status = service.resume_release(run_id, wait_timeout_s=wait_timeout,
                                            on_status=shown)
    except (EhrReleaseError, TimeoutError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    typer.echo(f"{run_id}: {status}")
