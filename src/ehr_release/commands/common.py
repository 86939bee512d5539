"""What the command groups share: the run-id argument, identities, the one-line failure, and
the options several commands take.

Only Typer and the standard library load here; anything heavier is imported by the
command that needs it, when it runs.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ehr_release.core.errors import EhrReleaseError

ParamOpt = Annotated[list[str] | None, typer.Option(
    "--param", help="Algorithm parameter NAME=VALUE (repeatable), e.g. --param k=5.")]
RunnerOpt = Annotated[str, typer.Option(
    help="Prefect task runner: threads[:N], dask[:N] (local cluster) or tcp://HOST:PORT.")]


def full_run_id(value: str | None) -> str | None:
    """A run-id argument's callback: a unique prefix becomes the run's id; several runs
    starting with it are refused in one line listing them (see cli_support.run_ids)."""
    if value is None:
        return None
    from ehr_release.cli_support.run_ids import resolve_run_id

    try:
        return resolve_run_id(value)
    except EhrReleaseError as exc:
        raise fail(str(exc)) from None



def _hidden_prompt(text: str) -> str:
    """A hidden prompt; an aborted one (Ctrl-D, Ctrl-C) is an empty answer, never a bare
    click ``Abort`` (a RuntimeError whose empty message printed as ``error: ``)."""
    import click

    try:
        return str(typer.prompt(text, hide_input=True, default="", show_default=False))
    except click.exceptions.Abort:
        return ""



def identity(name: str, role: str, credential_env: str | None = None):
    """``name`` authenticated for ``role`` when the site has users (see governance)."""
    from ehr_release.governance.identity import CREDENTIAL_ENV, cli_identity

    return cli_identity(name, role, credential_env=credential_env or CREDENTIAL_ENV,
                        prompt=_hidden_prompt)



def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)
