"""``ehr-release``: the data steward's and reviewer's command line — the root app.

The commands live in :mod:`ehr_release.commands`, one module per job (starting work,
decisions, reading runs, release files, looking after the site) and in
:mod:`ehr_release.history.cli`; this module only wires them into one Typer app. Each command
calls service functions and turns the project's own errors into one line on stderr and exit
code 1. Parsing a command imports Typer and the standard library only: Prefect, pandas,
SQLAlchemy and WeasyPrint load inside the command that needs them, after its options are
read, so ``--help``, ``status`` and ``list`` start in a fraction of a second and ``run``
refuses a bad file or parameter before any of them loads. Help is plain text (no rich
formatting, whose import alone costs more than the rest of parsing), and plain ``str``,
``int`` and ``bool`` values skip Typer's Pydantic adapters (see cli_support.plain_params).
"""

from __future__ import annotations

import os
import sys
from contextlib import suppress
from typing import Annotated, NoReturn

import typer

from ehr_release import __version__
from ehr_release.cli_support import plain_params
from ehr_release.commands import admin, decisions, files, release, runs
from ehr_release.commands.admin import MARKUP, audit_app, server_app, site_app, users_app
from ehr_release.history.cli import history_command, policy_app, source_app

plain_params.install()  # str/int/bool values without Pydantic: parsing stays cheap

app = typer.Typer(help="Governed release of patient data: anonymize, verify, certify, "
                       "approve, publish.", no_args_is_help=True, add_completion=False,
                  rich_markup_mode=MARKUP)
app.add_typer(audit_app, name="audit")
app.add_typer(server_app, name="server")
app.add_typer(users_app, name="users")
app.add_typer(source_app, name="source")
app.add_typer(policy_app, name="policy")
app.command("history")(history_command)
app.add_typer(site_app, name="site")


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


app.command()(release.run)
app.command()(release.compare)
app.command()(release.resume)
app.command()(decisions.approve)
app.command()(decisions.publish)
app.command()(runs.status)
app.command("list")(runs.list_runs)
app.command()(runs.algorithms)
app.command()(files.verify)
app.command()(files.reconstruct)
app.command("generate-sample")(files.generate_sample_cmd)
app.command("warm-up")(files.warm_up_cmd)
app.command("home")(runs.home_cmd)
app.command()(admin.dashboard)


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
    """The ``ehr-release`` entry point: the app, with database failures as one line, and
    the interpreter's teardown skipped when nothing needs it (:func:`_leave`)."""
    try:
        app()  # standalone: it ends by raising SystemExit, usage errors included
        code = 0
    except SystemExit as done:
        code = _exit_code(done.code)
    except Exception as exc:  # noqa: BLE001 - only database failures are turned into a line
        line = database_problem(exc)
        if line is None:
            raise
        typer.echo(f"error: {line}", err=True)
        code = 1
    _leave(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # SystemExit("message"), as the interpreter would show it
    return 1


def _leave(code: int) -> NoReturn:
    """Exit with ``code``; without the interpreter's teardown when nothing waits on it.

    Why: tearing down the modules and objects a command loaded (pandas, SQLAlchemy, the
    input it read) took 0.43 s after ``run`` printed its run id on 58,302 records, time
    the steward waits at a prompt that has nothing left to do. It is skipped only when no
    exit handler can matter: Prefect not loaded (its log and event workers send what is
    left at exit), no other thread running, no child process of ``multiprocessing`` alive
    (its exit handler joins them). The database connections are closed first (a server
    sees a client leave, not a dropped socket), logging is shut down and the streams
    flushed, as at a normal exit. Anything else exits normally.
    """
    import multiprocessing
    import threading

    quiet = ("prefect" not in sys.modules and threading.active_count() == 1
             and not multiprocessing.active_children())
    if not quiet:
        raise SystemExit(code)
    import logging

    engines = sys.modules.get("ehr_release.storage.engine")
    if engines is not None:
        with suppress(Exception):
            engines.reset_engines()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run_cli()
