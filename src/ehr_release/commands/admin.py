"""Looking after the site: the audit trail, the local Prefect server, dashboard users,
the dashboard itself and the site's kind (normal or test).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ehr_release.commands.common import fail, full_run_id
from ehr_release.core.errors import EhrReleaseError

MARKUP = None  # plain help: Typer's rich formatting costs ~0.25 s of CPU to import

audit_app = typer.Typer(help="The tamper-evident audit trail.", no_args_is_help=True,
                        rich_markup_mode=MARKUP)
server_app = typer.Typer(help="The local Prefect server the CLI shares between commands.",
                         no_args_is_help=True, rich_markup_mode=MARKUP)
users_app = typer.Typer(help="Dashboard users and their roles.", no_args_is_help=True,
                        rich_markup_mode=MARKUP)
site_app = typer.Typer(help="This site: made once, as a normal site or a test site.",
                       no_args_is_help=True, rich_markup_mode=MARKUP)


@audit_app.command("verify")
def audit_verify() -> None:
    """Exit 0 only if the chain is intact and every published file matches its hash."""
    from ehr_release.governance.integrity import check_integrity

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
                                            callback=full_run_id)] = None,
    fmt: Annotated[str, typer.Option("--format", help="jsonl or csv.")] = "jsonl",
) -> None:
    """Write the audit events (of one run, or all) to stdout."""
    from ehr_release.storage.audit import export_events

    if fmt not in {"jsonl", "csv"}:
        raise fail(f"--format must be jsonl or csv, got {fmt!r}")
    sys.stdout.write(export_events(run, fmt))



@server_app.command("start")
def server_start() -> None:
    """Start (or reuse) the local Prefect server; prints its API URL."""
    from ehr_release.flows.server import ensure_api

    try:
        typer.echo(ensure_api())
    except RuntimeError as exc:
        raise fail(str(exc)) from None



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
        raise fail(str(exc)) from None
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
        raise fail(str(exc)) from None
    typer.echo(f"user {name!r} is now a {role}", err=True)



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
        raise fail(str(exc)) from None
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
        raise fail(str(exc)) from None
    typer.echo("test site created" if test else "site created")



@site_app.command("status")
def site_status() -> None:
    """Say whether this is a test site (read from the audit chain's first event)."""
    from ehr_release.storage.site import is_test_site

    typer.echo("test site" if is_test_site() else "normal site")
