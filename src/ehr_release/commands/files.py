"""Working on release files outside a run: re-verify a release, reconstruct a
disassociation release, write a synthetic sample.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ehr_release.commands.common import fail
from ehr_release.core.errors import EhrReleaseError


def verify(
    release: Annotated[Path, typer.Option(help="Release file, or a published release folder.")],
    original: Annotated[Path | None, typer.Option(
        help="The original data (as for `run --input`); without it (a recipient, an outside "
             "auditor) only the checks the release alone allows run, and the report lists "
             "those it could not run.")] = None,
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
    from ehr_release.parameters.params import parse_assignments
    from ehr_release.privacy.release_files import read_release_files, release_id_of
    from ehr_release.release.verification import verify_and_attack

    try:
        entry, params, declared = release_parameters(release, algorithm,
                                                     parse_assignments(param or []))
        files = read_release_files(release)
        for stray in getattr(files, "strays", ()):  # the operator's own paths: not stored
            typer.echo(f"not a declared release file: {stray.path} ({stray.kind})", err=True)
        if original is None:
            return _verify_without_original(entry.name, release, files, params, declared)
        if entry.id_file is not None and release_id is None:
            release_id = release_id_of(release)
        dataset = read_dataset(original, diagnoses, admissions_path=admissions,
                               class_column=class_column)
        report, attack = verify_and_attack(entry, files, dataset, params, release_id)
    except EhrReleaseError as exc:
        raise fail(str(exc)) from None
    typer.echo(json.dumps({**report.to_dict(),
                           "attack": None if attack is None else attack.to_dict()},
                          indent=2, default=str))
    typer.echo(verdict_line(entry.name, release, report.holds,
                            [(r.name, r.required) for r in report.failures], params, declared),
               err=True)
    if not report.holds:
        raise typer.Exit(code=1)



def _verify_without_original(name: str, release: Path, files: dict[str, bytes],
                             params: dict[str, Any], declared: list[str]) -> None:
    """A recipient's verify: the closed world and the checks the bytes alone allow.

    Disassociation's recipient checks (the layout, declared k and m, the subrecord order
    replayed, the chunk order as far as published supports decide it) run here; the replay
    of HorPart, VerPart and Refine and the counts against the original need the site's
    copy, and the report names them under ``not_run``. Other families' checks all count
    against the original, so they are refused with a message naming ``--original``.
    """
    from ehr_release.cli_support.release_params import verdict_line

    strays = list(getattr(files, "strays", ()))
    if name != "disassociation":
        raise fail(f"verifying a {name} release needs --original: every check of this "
                   "model counts against the original data")
    from ehr_release.privacy.disassociation.published_checks import recipient_verdict

    verdict = recipient_verdict(dict(files), params)
    holds = verdict.report.holds and not strays
    failed = [(r.name, r.required) for r in verdict.report.failures]
    if strays:
        failed.insert(0, ("closed world", "no file beside the declared ones"))
    typer.echo(json.dumps({**verdict.report.to_dict(), "mode": "without the original",
                           "not_run": verdict.not_run}, indent=2, default=str))
    typer.echo(verdict_line(name, release, holds, failed, params, declared)
               + f"; checked without the original, {len(verdict.not_run)} check(s) not run "
               "(see not_run)", err=True)
    if not holds:
        raise typer.Exit(code=1)


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
    from ehr_release.core.errors import InputError
    from ehr_release.core.randomness import check_random_state
    from ehr_release.privacy.release_files import read_release_files
    from ehr_release.samples.sample import write_sample

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
        raise fail(str(exc)) from None
    typer.echo(f"{out} ({dataset.n_patients:,} records)")



def generate_sample_cmd(
    out: Annotated[Path, typer.Option(help="Output file (.csv or .parquet).")],
    patients: Annotated[int, typer.Option(help="Number of patients.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed (deterministic output).")] = 0,
    longitudinal: Annotated[bool, typer.Option(help="Give every code an age.")] = False,
) -> None:
    """Write a synthetic EHR extract (demo, benchmarks)."""
    from ehr_release.core.errors import ParameterError
    from ehr_release.samples.sample import generate_sample, write_sample

    # Checked here, under the options' own names, before any patient is generated.
    if out.suffix.lower() not in {".csv", ".parquet"}:
        raise fail(str(ParameterError("--out", "must end in .csv or .parquet", str(out))))
    if patients < 1:
        raise fail(str(ParameterError("--patients", "must be a positive integer", patients)))
    try:
        write_sample(generate_sample(patients, seed=seed, longitudinal=longitudinal), out)
    except OSError as exc:
        raise fail(f"file {out}: cannot be written ({exc.strerror or type(exc).__name__})"
                    ) from None
    typer.echo(str(out))


def warm_up_cmd() -> None:
    """Compile ArtUC's and LDA's kernels and migrate a Prefect database template now (`make
    install` runs it): a first release then loads the kernels instead of compiling for
    about a minute, and a home's first server starts on a copy of the migrated database."""
    import time

    from ehr_release.flows.prefect_database import build_template
    from ehr_release.registry.warm_up import warm_up

    warm_up(typer.echo)
    started = time.monotonic()
    try:
        path = build_template()
    except (OSError, RuntimeError) as exc:  # not fatal: a first server migrates instead
        typer.echo(f"prefect database template: not made ({exc})", err=True)
        return
    typer.echo(f"prefect database template: {time.monotonic() - started:.1f} s ({path})")
