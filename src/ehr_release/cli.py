"""``ehr-release``: the data steward's and reviewer's command line.

Commands call service functions and turn the project's own errors into one line on stderr
and exit code 1. Prefect is imported lazily so its home can be pointed at ``<home>/prefect``
first, so quick commands (status, audit) stay quick, and so ``run`` and ``compare`` refuse a
bad file or parameter before Prefect is imported or a server started. ``run`` shows that
refusal before even SQLAlchemy loads, and never imports Prefect: its flow process does,
started while ``run`` still reads the input (:mod:`ehr_release.flows.launch`). Progress goes
to stderr; stdout's last line is what scripts read.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from ehr_release import __version__
from ehr_release.errors import EhrReleaseError
from ehr_release.history.cli import history_command, policy_app, source_app
from ehr_release.storage.actions import DEFAULT_APPROVAL_TIMEOUT_S

app = typer.Typer(help="Governed release of patient data: anonymize, verify, certify, "
                       "approve, publish.", no_args_is_help=True, add_completion=False)
audit_app = typer.Typer(help="The tamper-evident audit trail.", no_args_is_help=True)
server_app = typer.Typer(help="The local Prefect server the CLI shares between commands.",
                         no_args_is_help=True)
users_app = typer.Typer(help="Dashboard users and their roles.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
app.add_typer(server_app, name="server")
app.add_typer(users_app, name="users")
app.add_typer(source_app, name="source")
app.add_typer(policy_app, name="policy")
app.command("history")(history_command)
site_app = typer.Typer(help="This site: made once, as a normal site or a test site.",
                       no_args_is_help=True)
app.add_typer(site_app, name="site")

ParamOpt = Annotated[list[str] | None, typer.Option(
    "--param", help="Algorithm parameter NAME=VALUE (repeatable), e.g. --param k=5.")]
RunnerOpt = Annotated[str, typer.Option(
    help="Prefect task runner: threads[:N], dask[:N] (local cluster) or tcp://HOST:PORT.")]


def _full_run_id(value: str | None) -> str | None:
    """A run-id argument's callback: a unique prefix becomes the run's id; several runs
    starting with it are refused in one line listing them (see cli_support.run_ids)."""
    if value is None:
        return None
    from ehr_release.cli_support.run_ids import resolve_run_id

    try:
        return resolve_run_id(value)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None


def _hidden_prompt(text: str) -> str:
    """A hidden prompt; an aborted one (Ctrl-D, Ctrl-C) is an empty answer, never a bare
    click ``Abort`` (a RuntimeError whose empty message printed as ``error: ``)."""
    import click

    try:
        return str(typer.prompt(text, hide_input=True, default="", show_default=False))
    except click.exceptions.Abort:
        return ""


def _identity(name: str, role: str, credential_env: str | None = None):
    """``name`` authenticated for ``role`` when the site has users (see governance)."""
    from ehr_release.governance import CREDENTIAL_ENV, cli_identity

    return cli_identity(name, role, credential_env=credential_env or CREDENTIAL_ENV,
                        prompt=_hidden_prompt)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ehr-release {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", callback=_version,
                                               is_eager=True, help="Show the version.")]
         = False) -> None:
    from ehr_release.flows.server import configure_prefect_home

    configure_prefect_home()


@app.command()
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
) -> None:
    """Start a release; prints the run id. Stops at awaiting_approval unless --approve-as.

    Once users are registered the requester must be a steward and give their credential
    (EHR_RELEASE_CREDENTIAL, else a prompt); --approve-as needs a reviewer's
    (EHR_RELEASE_REVIEWER_CREDENTIAL, else a prompt).
    """
    from ehr_release.params import parse_assignments

    try:
        if approve_as is not None and not (reason or "").strip():
            raise EhrReleaseError("--approve-as needs --reason")
        algorithm, params, fingerprint = _chosen_algorithm(
            algorithm, parse_assignments(param or []), from_comparison, row)
    except EhrReleaseError as exc:
        raise _refused(requester, input, exc) from None
    _refuse_bad_input(requester, algorithm, params, input, diagnoses, admissions, class_column,
                      code_system)

    from ehr_release import service
    from ehr_release.destinations import DestinationError
    from ehr_release.governance import REVIEWER_CREDENTIAL_ENV
    from ehr_release.request import check_data_use_policy
    from ehr_release.storage import runs
    from ehr_release.storage.actions import Decision
    from ehr_release.storage.runs import Status

    try:
        requester = _identity(requester, "steward").name
        reviewer = (_identity(approve_as, "reviewer", REVIEWER_CREDENTIAL_ENV)
                    if approve_as is not None else None)
        try:
            request = service.request_from_cli(
                input_path=input, diagnoses=diagnoses, admissions=admissions,
                class_column=class_column, algorithm=algorithm, params=params,
                requester=requester, out_dir=out, approval_timeout_s=approval_timeout,
                expected_fingerprint=fingerprint, task_runner=task_runner,
                recipient=recipient, purpose=purpose, terms=terms, expires=expires,
                allow_empty=allow_empty, allow_low_utility=allow_low_utility, source=source,
                code_system=code_system,
            ).with_comparison(from_comparison, row)
        except DestinationError as refused:  # a path out of the root, or a file: audited
            service.record_refusal(requester, runs.new_run_id(), str(input), refused)
            raise
        check_data_use_policy(request)  # the site may require recipient, terms, expiry
        if approve_as is not None:
            service.refuse_self_approval(request, approve_as)
        started = time.monotonic()
        # The flow process imports Prefect (seconds) while this one reads the input in full.
        flow = service.launch_background(request)
        try:
            service.precheck(request, register=True, preflighted=True)
        except BaseException:
            service.call_off(flow, request)
            raise
        from ehr_release.progress import StageProgress

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
        raise _fail(str(exc)) from None
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
                      class_column: str | None, code_system: str | None = None) -> None:
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
                  code_system=code_system)
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
        who = _identity(requester, "steward").name
    except EhrReleaseError as exc:
        return _fail(str(exc))
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
    from ehr_release.comparison_file import load_comparison_row  # no Prefect import

    return load_comparison_row(str(comparison), row)


def _records_of(run_id: str) -> int | None:
    """How many patient records the registered run's dataset holds (for the progress)."""
    from ehr_release.storage import runs

    try:
        return runs.get_dataset(runs.get_run(run_id).dataset_id).rows
    except EhrReleaseError:
        return None


@app.command()
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
) -> None:
    """Anonymize one dataset with several algorithms and parameters; recommend one.

    Writes OUT/comparisons/<id>/comparison.{json,html,pdf}; prints the folder.
    """
    import secrets

    from pydantic import ValidationError

    from ehr_release import service
    from ehr_release.compare import parse_grid
    from ehr_release.destinations import resolve_destination
    from ehr_release.params import parse_assignments
    from ehr_release.request import ComparisonRequest, check_runner_spec

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
                code_system=code_system)
            candidates = service.comparison_candidates(request)
        except EhrReleaseError as refused:  # audited like a refused run request
            service.record_refusal(requester, comparison_id, str(input), refused)
            raise
        from ehr_release.progress import CompareProgress

        with CompareProgress(len(candidates)) as shown:
            report = service.start_comparison(request, on_candidate=shown)
    except ValidationError as exc:
        raise _fail(f"invalid comparison request: {exc.errors()[0]['loc']}: "
                    f"{exc.errors()[0]['msg']}") from None
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    best = report["recommended_row"]
    typer.echo(f"recommended row: {best}" if best is not None
               else "no candidate verified and met the requirements", err=True)
    typer.echo(str(request.folder))


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="A run whose flow process stopped (or a "
                                               "unique start of its id).",
                                          callback=_full_run_id)],
    wait_timeout: Annotated[int, typer.Option(help="Seconds to wait.")] = 3600,
) -> None:
    """Restart a run whose flow died (crash, reboot); finished stages come from the cache."""
    from ehr_release import service
    from ehr_release.progress import StageProgress
    from ehr_release.storage import runs
    from ehr_release.storage.runs import Status

    try:
        run = runs.get_run(run_id)
        with StageProgress(run_id, records=_records_of(run_id)) as shown:
            shown.resumed_from(Status(run.status))
            status = service.resume_release(run_id, wait_timeout_s=wait_timeout,
                                            on_status=shown)
    except (EhrReleaseError, TimeoutError, RuntimeError) as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"{run_id}: {status}")


@app.command()
def approve(
    run_id: Annotated[str, typer.Argument(help="The run to decide (or a unique start of "
                                               "its id).", callback=_full_run_id)],
    reviewer: Annotated[str, typer.Option(help="Reviewer name.")],
    decision: Annotated[str, typer.Option(help="approve or reject.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit trail).")],
) -> None:
    """Record a reviewer's decision; an approval publishes the release right away.

    No process waits for the decision: recording an approval starts the publishing flow
    here. Exits 1 when an approved run does not end published. Once users are registered
    the reviewer's credential is needed (EHR_RELEASE_CREDENTIAL, else a prompt).
    """
    from ehr_release import service
    from ehr_release.progress import StepProgress
    from ehr_release.storage import runs
    from ehr_release.storage.actions import Decision
    from ehr_release.storage.runs import Status

    try:
        who = _identity(reviewer, "reviewer")
        decided = {"reviewer": who.name, "decision": decision, "reason": reason,
                   "channel": who.channel, "role": who.role}
        with StepProgress(f"{decision} {run_id}") as shown:  # each step on stderr
            status = service.decide(run_id, **decided)  # an approval publishes (Prefect)
            if decision == Decision.APPROVE and status != Status.PUBLISHED:
                shown.failed()
    except (EhrReleaseError, TimeoutError, RuntimeError) as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"{run_id}: {status}")
    if decision == Decision.APPROVE and status != Status.PUBLISHED:
        typer.echo(f"error: {runs.get_run(run_id).error or 'not published'}", err=True)
        raise typer.Exit(code=1)


@app.command()
def publish(run_id: Annotated[str, typer.Argument(
        help="An approved run to publish (or a unique start of its id).",
        callback=_full_run_id)]) -> None:
    """Finish publishing an approved run whose publishing stopped (crash, reboot) or failed
    (disk full, a broken destination): retried from the same pinned, approved release."""
    from ehr_release import service
    from ehr_release.storage.runs import Status

    try:
        status = service.publish(run_id)
    except (EhrReleaseError, RuntimeError) as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"{run_id}: {status}")
    if status != Status.PUBLISHED:
        raise typer.Exit(code=1)


@app.command()
def status(run_id: Annotated[str, typer.Argument(help="Run id (or a unique start of it).",
                                                 callback=_full_run_id)],
           as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False) -> None:
    """Show one run: status, parameters, verification verdict, approval."""
    from ehr_release import service
    from ehr_release.cli_support.status_view import effective_parameters, status_lines

    try:
        info = service.run_summary(run_id)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    info["effective_parameters"] = effective_parameters(info["algorithm"], info["parameters"])
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo("\n".join(status_lines(info)))


@app.command("list")
def list_runs(limit: Annotated[int, typer.Option(help="How many runs.")] = 50) -> None:
    """Recent runs, newest first (a run whose flow died shows as stalled)."""
    from ehr_release import service
    from ehr_release.storage import runs

    service.expire_overdue()
    typer.echo(f"{'RUN':<36}  {'STATUS':<18} {'ALGORITHM':<16} {'REQUESTER':<12} CREATED (UTC)")
    for run in runs.list_runs(limit=limit):
        shown = service.run_state(run.id).shown
        typer.echo(f"{run.id:<36}  {shown:<18} {run.algorithm:<16} {run.requester:<12} "
                   f"{run.created_at[:19]}")


@app.command()
def algorithms() -> None:
    """Registered algorithms and their parameters: required or default, allowed values.

    Give parameters as --param NAME=VALUE; a parameter with a default may be left out.
    """
    from ehr_release import registry
    from ehr_release.params import REQUIRED, allowed_values

    for i, name in enumerate(registry.names()):
        entry = registry.get(name)
        typer.echo(("\n" if i else "") + f"{name}: {entry.summary}")
        typer.echo(f"  {'PARAMETER':<14} {'REQUIRED':<9} {'DEFAULT':<18} ALLOWED")
        for p in entry.params:
            required = p.default is REQUIRED
            typer.echo(f"  {p.name:<14} {'yes' if required else 'no':<9} "
                       f"{'-' if required else _shown_default(p.default):<18} "
                       f"{allowed_values(p)}")
            typer.echo(f"  {'':<14} {p.help}")


def _shown_default(value: object) -> str:
    """A default as a person types it: unset and empty say so instead of None and ''."""
    if value is None:
        return "(unset)"
    if value == "":
        return "(empty)"
    return str(value)


@app.command()
def verify(
    release: Annotated[Path, typer.Option(help="Release file, or a published release folder.")],
    original: Annotated[Path, typer.Option(help="The original data (as for `run --input`).")],
    algorithm: Annotated[str | None, typer.Option(
        help="Algorithm that produced the release (default: its manifest.json's).")] = None,
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="Parameter NAME=VALUE (repeatable); default: the values the "
                        "release's manifest.json declares.")] = None,
    diagnoses: Annotated[Path | None, typer.Option(help="Long diagnoses table.")] = None,
    admissions: Annotated[Path | None, typer.Option(help="Admissions table.")] = None,
    class_column: Annotated[str | None, typer.Option(help="Class column name.")] = None,
    release_id: Annotated[str | None, typer.Option(
        help="Run id the release was made under (its patient pseudonyms depend on it); read "
             "from the published folder's manifest.json when omitted.")] = None,
) -> None:
    """Re-verify a release independently (closed world, model, source ids, then the attack
    audit); JSON report on stdout, a one-line verdict on stderr, exit 1 if it does not hold."""
    from ehr_release.cli_support.release_params import release_parameters, verdict_line
    from ehr_release.ingest import read_dataset
    from ehr_release.params import parse_assignments
    from ehr_release.release_files import read_release_files, release_id_of
    from ehr_release.verification import verify_and_attack

    try:
        entry, params, declared = release_parameters(release, algorithm,
                                                     parse_assignments(param or []))
        files = read_release_files(release)
        for stray in getattr(files, "strays", ()):  # the operator's own paths: not stored
            typer.echo(f"not a declared release file: {stray.path} ({stray.kind})", err=True)
        if entry.id_file is not None and release_id is None:
            release_id = release_id_of(release)
        dataset = read_dataset(original, diagnoses, admissions_path=admissions,
                               class_column=class_column)
        report, attack = verify_and_attack(entry, files, dataset, params, release_id)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    typer.echo(json.dumps({**report.to_dict(),
                           "attack": None if attack is None else attack.to_dict()},
                          indent=2, default=str))
    typer.echo(verdict_line(entry.name, release, report.holds,
                            [(r.name, r.required) for r in report.failures], params, declared),
               err=True)
    if not report.holds:
        raise typer.Exit(code=1)


@app.command()
def reconstruct(
    release: Annotated[Path, typer.Option(help="A disassociation release.parquet, or the "
                                               "published release folder.")],
    out: Annotated[Path, typer.Option(help="Output table (.csv or .parquet).")],
    seed: Annotated[int | None, typer.Option(help="Seed (same seed, same reconstruction).")]
    = None,
) -> None:
    """Draw one possible original dataset from a disassociation release, as a plain table.

    Researchers analyse reconstructions with ordinary tools; different seeds give different
    equally possible datasets, so estimates should be averaged over several.
    """
    from ehr_release.algorithms.disassociation.model import RELEASE_FILE, DisassociatedRelease
    from ehr_release.algorithms.disassociation.reconstruct import reconstruct_dataset
    from ehr_release.errors import InputError
    from ehr_release.randomness import check_random_state
    from ehr_release.release_files import read_release_files
    from ehr_release.sample import write_sample

    try:
        files = read_release_files(release)
        data = files.get(RELEASE_FILE) or next(iter(files.values()))
        try:
            parsed = DisassociatedRelease.from_bytes(data)
        except InputError as exc:  # it names the release's file name, not the one given
            raise InputError(exc.problem, file=str(release), row=exc.row,
                             column=exc.column) from None
        dataset = reconstruct_dataset(parsed, check_random_state(seed))
        write_sample(dataset, out)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"{out} ({dataset.n_patients:,} records)")


@app.command("generate-sample")
def generate_sample_cmd(
    out: Annotated[Path, typer.Option(help="Output file (.csv or .parquet).")],
    patients: Annotated[int, typer.Option(help="Number of patients.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed (deterministic output).")] = 0,
    longitudinal: Annotated[bool, typer.Option(help="Give every code an age.")] = False,
) -> None:
    """Write a synthetic EHR extract (demo, benchmarks)."""
    from ehr_release.errors import ParameterError
    from ehr_release.sample import generate_sample, write_sample

    # Checked here, under the options' own names, before any patient is generated.
    if out.suffix.lower() not in {".csv", ".parquet"}:
        raise _fail(str(ParameterError("--out", "must end in .csv or .parquet", str(out))))
    if patients < 1:
        raise _fail(str(ParameterError("--patients", "must be a positive integer", patients)))
    try:
        write_sample(generate_sample(patients, seed=seed, longitudinal=longitudinal), out)
    except OSError as exc:
        raise _fail(f"file {out}: cannot be written ({exc.strerror or type(exc).__name__})"
                    ) from None
    typer.echo(str(out))


@audit_app.command("verify")
def audit_verify() -> None:
    """Exit 0 only if the chain is intact and every published file matches its hash."""
    from ehr_release.integrity import check_integrity

    problems, summary = check_integrity()
    typer.echo(summary)
    for p in problems:
        typer.echo(f"FAIL: {p}", err=True)
    if problems:
        raise typer.Exit(code=1)


@audit_app.command("export")
def audit_export(
    run: Annotated[str | None, typer.Option("--run", help="Only this run's events (or a "
                                                         "unique start of its id).",
                                            callback=_full_run_id)] = None,
    fmt: Annotated[str, typer.Option("--format", help="jsonl or csv.")] = "jsonl",
) -> None:
    """Write the audit events (of one run, or all) to stdout."""
    from ehr_release.storage.audit import export_events

    if fmt not in {"jsonl", "csv"}:
        raise _fail(f"--format must be jsonl or csv, got {fmt!r}")
    sys.stdout.write(export_events(run, fmt))


@server_app.command("start")
def server_start() -> None:
    """Start (or reuse) the local Prefect server; prints its API URL."""
    from ehr_release.flows.server import ensure_api

    try:
        typer.echo(ensure_api())
    except RuntimeError as exc:
        raise _fail(str(exc)) from None


@server_app.command("status")
def server_status() -> None:
    """Print the API URL of this home's running local Prefect server; exit 1 if none runs.

    Scripts use it to stop only a server they started (the examples do).
    """
    from ehr_release.flows.server import running_server

    api = running_server()
    if api is None:
        typer.echo("no local server is running", err=True)
        raise typer.Exit(code=1)
    typer.echo(api)


@server_app.command("stop")
def server_stop() -> None:
    """Stop the local Prefect server this home started (see `ehr-release home`)."""
    from ehr_release.flows.server import stop_local_server

    typer.echo("stopped" if stop_local_server() else "no local server was running")


@app.command("home")
def home_cmd(as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False
             ) -> None:
    """Where this installation keeps its state: home, database, releases, Prefect.

    The home is EHR_RELEASE_HOME, else the per-user data directory, wherever a command is
    started; the database password is never shown.
    """
    import os

    from sqlalchemy.engine import make_url

    from ehr_release.destinations import shown_releases_root
    from ehr_release.flows.server import running_server
    from ehr_release.storage.engine import HOME_ENV, database_url, home

    api = running_server()
    info = {"home": str(home()),
            "home_from": HOME_ENV if os.environ.get(HOME_ENV) else "per-user default",
            "database": make_url(database_url()).render_as_string(hide_password=True),
            "releases_root": shown_releases_root(),
            "prefect_home": os.environ.get("PREFECT_HOME"),
            "prefect_api": api,
            "prefect_ui": api.removesuffix("/api") if api else None}
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    for key, value in info.items():
        typer.echo(f"{key:>13}: {value if value is not None else 'not running'}")
    legacy = Path(".ehr_release")
    if not os.environ.get(HOME_ENV) and (legacy / "ehr_release.db").exists():
        typer.echo(f"note: {legacy.resolve()} holds state from an older version (one home "
                   f"per folder); set {HOME_ENV}={legacy.resolve()} to keep using it",
                   err=True)


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(help="User name (as shown in the audit trail).")],
    role: Annotated[str, typer.Option(help="steward, reviewer or auditor.")],
) -> None:
    """Create a dashboard user; prints the sign-in credential once (only a hash is kept)."""
    from ehr_release.storage.users import add_user

    try:
        credential = add_user(name, role)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    typer.echo(credential)
    typer.echo(f"user {name!r} ({role}) created; the credential above is shown only once",
               err=True)


@users_app.command("set-role")
def users_set_role(
    name: Annotated[str, typer.Argument(help="An existing user.")],
    role: Annotated[str, typer.Option(help="steward, reviewer or auditor.")],
) -> None:
    """Change a user's role; recorded in the audit trail, which is where roles are read from
    (a role edited in the database alone changes nothing)."""
    from ehr_release.storage.users import set_role

    try:
        set_role(name, role)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"user {name!r} is now a {role}", err=True)


@app.command()
def dashboard(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8765,
    secure_cookies: Annotated[bool | None, typer.Option(
        "--secure-cookies/--no-secure-cookies",
        help="Mark session cookies Secure (TLS ends at a proxy). Default: "
             "EHR_RELEASE_SECURE_COOKIES, else off; always on for https requests.")] = None,
) -> None:
    """Serve the reviewer dashboard (sign in, review, approve or reject, read the audit).

    Sign-in limits come from EHR_RELEASE_SIGNIN_* (see the README's dashboard section); a
    sign-in counts against the socket's address unless EHR_RELEASE_TRUSTED_PROXIES names the
    proxies whose X-Forwarded-For is believed.
    """
    import uvicorn

    from ehr_release.dashboard import app as dashboard_app
    from ehr_release.dashboard.security import secure_cookies_from_env

    try:
        secure = secure_cookies_from_env() if secure_cookies is None else secure_cookies
        web = dashboard_app.create_app(secure_cookies=secure)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    if host not in {"127.0.0.1", "localhost", "::1"} and not secure:
        typer.echo("warning: serving beyond loopback; put it behind TLS and pass "
                   "--secure-cookies (cookies are HttpOnly and SameSite=Strict, but not "
                   "Secure over plain HTTP)", err=True)
    # proxy_headers=False: uvicorn would otherwise take the client's address from
    # X-Forwarded-For whenever the peer is 127.0.0.1 — any local process could then forge a
    # new client per sign-in attempt. EHR_RELEASE_TRUSTED_PROXIES is the one way to trust a
    # proxy (dashboard.security.client_address).
    uvicorn.run(web, host=host, port=port, log_level="warning", proxy_headers=False)


@site_app.command("init")
def site_init(test: Annotated[bool, typer.Option(
        "--test", help="A test site: seeded (replayable) releases are accepted and every "
                       "certificate and datasheet says TEST SITE on page 1.")] = False,
              ) -> None:
    """Make this site (home and database) before anything else uses it.

    The kind is recorded as the audit chain's first event and can never change; a normal
    site is also made implicitly on first use, so only a test site needs this command.
    """
    from ehr_release.storage.site import create_site

    try:
        create_site(test=test)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    typer.echo("test site created" if test else "site created")


@site_app.command("status")
def site_status() -> None:
    """Say whether this is a test site (read from the audit chain's first event)."""
    from ehr_release.storage.site import is_test_site

    typer.echo("test site" if is_test_site() else "normal site")


def database_problem(exc: BaseException) -> str | None:
    """One line for a database that is down, refuses us, or is named by a bad URL.

    Names the host, port and database of ``EHR_RELEASE_DATABASE_URL`` with the password
    hidden, and the driver's first line — never SQL with parameters, which may hold data.
    """
    from sqlalchemy import exc as sa_exc
    from sqlalchemy.engine import make_url

    if not isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError
                      | sa_exc.ArgumentError | sa_exc.NoSuchModuleError):
        return None
    from ehr_release.storage.engine import database_url

    try:
        url = make_url(database_url())
        backend = url.get_backend_name()
        where = (f"{backend} at {url.host}:{url.port or 'default'}/{url.database}" if url.host
                 else f"{backend} {url.database or ''}".strip())
    except sa_exc.ArgumentError:
        return "EHR_RELEASE_DATABASE_URL is not a valid database URL"
    orig = getattr(exc, "orig", None) or exc
    reason = (str(orig).strip().splitlines() or [type(orig).__name__])[0][:200]
    if isinstance(exc, sa_exc.ArgumentError | sa_exc.NoSuchModuleError):
        return f"EHR_RELEASE_DATABASE_URL is not usable ({where}): {reason}"
    return f"cannot use the database ({where}): {reason}"


def run_cli() -> None:
    """The ``ehr-release`` entry point: the app, with database failures as one line."""
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - only database failures are turned into a line
        line = database_problem(exc)
        if line is None:
            raise
        typer.echo(f"error: {line}", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    run_cli()
