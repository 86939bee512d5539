"""Reading what there is: one run (`status`), recent runs (`list`), the registered
algorithms, and where this installation keeps its state (`home`).

Parsing these imports nothing but Typer: the database loads when the command runs. ``status``
and ``list`` read a plain SQLite database with the standard library when they safely can
(:mod:`ehr_release.cli_support.quick_read`), else through the service as every command does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ehr_release.commands.common import fail, full_run_id
from ehr_release.core.errors import EhrReleaseError


def status(run_id: Annotated[str, typer.Argument(help="Run id (or a unique start of it).",
                                                 callback=full_run_id)],
           as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False) -> None:
    """Show one run: status, parameters, verification verdict, approval."""
    from ehr_release.cli_support import quick_read
    from ehr_release.cli_support.status_view import effective_parameters, status_lines

    try:
        info = quick_read.run_summary(run_id)  # None: the full path answers (and may write)
        if info is None:
            from ehr_release import service

            info = service.run_summary(run_id)
    except EhrReleaseError as exc:
        raise fail(str(exc)) from None
    info["effective_parameters"] = effective_parameters(info["algorithm"], info["parameters"])
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo("\n".join(status_lines(info)))



def list_runs(limit: Annotated[int, typer.Option(help="How many runs.")] = 50) -> None:
    """Recent runs, newest first (a run whose flow died shows as stalled).

    The requester is the audit chain's, as in ``status``: the column can be edited by
    anyone with database access (see ``storage.chained``)."""
    from ehr_release.cli_support import quick_read

    shown = quick_read.run_list(limit)  # None: the full path answers (and may write)
    if shown is None:
        from ehr_release import service
        from ehr_release.storage import chained, runs
        from ehr_release.storage.run_view import shown_requester

        service.expire_overdue()
        listed = runs.list_runs(limit=limit)
        chain = chained.requesters_of(run.id for run in listed)
        shown = [(run, service.run_state(run.id).shown,
                  shown_requester(run, chain.get(run.id))) for run in listed]
    typer.echo(f"{'RUN':<36}  {'STATUS':<18} {'ALGORITHM':<16} {'REQUESTER':<12} CREATED (UTC)")
    for run, state, requester in shown:
        typer.echo(f"{run.id:<36}  {state:<18} {run.algorithm:<16} {requester:<12} "
                   f"{run.created_at[:19]}")



def algorithms() -> None:
    """Registered algorithms and their parameters: required or default, allowed values.

    Give parameters as --param NAME=VALUE; a parameter with a default may be left out.
    """
    from ehr_release import registry
    from ehr_release.parameters.params import REQUIRED, allowed_values

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



def home_cmd(as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False
             ) -> None:
    """Where this installation keeps its state: home, database, releases, Prefect.

    The home is EHR_RELEASE_HOME, else the per-user data directory, wherever a command is
    started; the database password is never shown.
    """
    import os

    from sqlalchemy.engine import make_url

    from ehr_release.flows.server import running_server, ui_url
    from ehr_release.storage.destinations import shown_releases_root
    from ehr_release.storage.engine import HOME_ENV, database_url, home

    api = running_server()
    info = {"home": str(home()),
            "home_from": HOME_ENV if os.environ.get(HOME_ENV) else "per-user default",
            "database": make_url(database_url()).render_as_string(hide_password=True),
            "releases_root": shown_releases_root(),
            "prefect_home": os.environ.get("PREFECT_HOME"),
            "prefect_api": api,
            "prefect_ui": ui_url()}  # the dashboard links the same address
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
