"""The CLI's history commands: ``history``, ``source add|list`` and ``site`` policy changes.

Registered on the main app by :mod:`ehr_release.cli`; each imports its storage lazily so
``--help`` stays cheap.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from ehr_release.core.errors import EhrReleaseError

source_app = typer.Typer(help="Sources: the populations the site releases from.",
                         no_args_is_help=True, rich_markup_mode=None)  # plain help: quick
policy_app = typer.Typer(help="Site policy a decision depends on (audited changes).",
                         no_args_is_help=True, rich_markup_mode=None)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)


def history_command(
    source: Annotated[str | None, typer.Argument(help="A registered source (default: all).")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Each source's releases, their patient overlap, ε per patient, and what binds the next."""
    from ehr_release.history.view import source_history
    from ehr_release.storage.site_policy import require_source

    try:
        if source is not None:
            require_source(source)
        histories = source_history(source)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps([asdict(h) for h in histories], indent=2))
        return
    if not histories:
        typer.echo("no release has been made yet")
    for h in histories:
        typer.echo(f"source {h.source}: {len(h.releases)} release(s), {h.patients:,} "
                   f"patients seen")
        for r in h.releases:
            eps = f" ε={r.epsilon}" if r.epsilon else ""
            typer.echo(f"  {r.run_id}  {r.created_at[:16]}  {r.algorithm} {r.parameters}"
                       f"{eps}  {r.status}  {r.patients:,} patients")
        for later, earlier, shared, only_later, only_earlier in h.overlaps:
            typer.echo(f"  overlap {later[:12]}… ↔ {earlier[:12]}…: {shared:,} shared, "
                       f"{only_later:,} only in the later, {only_earlier:,} only in the earlier")
        spread = ", ".join(f"{c:,} at ε={v}" for v, c in h.epsilon_distribution)
        typer.echo(f"  ε per patient: max {h.epsilon_max} of {h.epsilon_total} "
                   f"({spread or 'none'})")
        for rule in h.binding:
            typer.echo(f"  binds the next release: {rule}")


@source_app.command("add")
def source_add(
    name: Annotated[str, typer.Argument(help="Source name (letters, digits, . _ -).")],
    by: Annotated[str, typer.Option("--by", help="Who registers it (audited).")],
    description: Annotated[str, typer.Option(help="What population it is.")] = "",
) -> None:
    """Register a source; runs name it with --source."""
    from ehr_release.storage.site_policy import register_source

    try:
        added = register_source(name, actor=by, description=description)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"source {name!r} " + ("registered" if added else "was already registered"))


@source_app.command("list")
def source_list() -> None:
    """The registered sources."""
    from ehr_release.storage.site_policy import sources

    for name in sources():
        typer.echo(name)


@policy_app.command("show")
def policy_show() -> None:
    """The policy in force: the per-patient ε total and weaker re-releases."""
    from ehr_release.storage.site_policy import epsilon_total, weaker_policy

    typer.echo(f"ε total per patient: {float(epsilon_total()):.6g}")
    typer.echo(weaker_policy().words())
    from ehr_release.storage.site_settings import SETTINGS, setting

    try:
        for name, spec in SETTINGS.items():
            stored = setting(name)
            typer.echo(f"{spec.command}: {stored.value} ({spec.words}; set by "
                       f"{stored.set_by} on {stored.set_at[:10]}: {stored.reason})")
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None


@policy_app.command("epsilon-total")
def policy_epsilon_total(
    total: Annotated[str, typer.Argument(help="The most ε any patient may carry (> 0).")],
    by: Annotated[str, typer.Option("--by", help="Who changes it (audited).")],
    reason: Annotated[str, typer.Option(help="Why (audited).")],
) -> None:
    """Change the per-patient ε total over every DP release (an audited admin action)."""
    from ehr_release.storage.site_policy import set_epsilon_total

    try:
        value = set_epsilon_total(total, actor=by, reason=reason)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"ε total per patient is now {float(value):.6g}")


@policy_app.command("weaker-releases")
def policy_weaker(
    decision: Annotated[str, typer.Argument(help="allow or refuse.")],
    by: Annotated[str, typer.Option("--by", help="Who changes it (audited).")],
    reason: Annotated[str, typer.Option(help="Why (audited; printed on the documents of "
                                             "every weaker release it lets through).")],
) -> None:
    """Allow or refuse releases weaker than an earlier one of the same patients."""
    from ehr_release.storage.site_policy import set_weaker_policy

    if decision not in {"allow", "refuse"}:
        raise _fail(f"weaker-releases takes 'allow' or 'refuse', got {decision!r}")
    try:
        policy = set_weaker_policy(decision == "allow", actor=by, reason=reason)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    typer.echo(policy.words())


def _site_setting(name: str, value: str | None, by: str | None, reason: str | None) -> None:
    """Show a site setting (no value) or change it: an audited admin action."""
    from ehr_release.storage.site_settings import change, setting

    try:
        if value is None:
            typer.echo(setting(name).value)
            return
        if by is None or reason is None:
            raise _fail(f"changing the site's setting needs --by NAME and --reason WHY "
                        f"(both audited), e.g. `ehr-release policy "
                        f"{name.replace('_', '-')} {value} --by NAME --reason WHY`")
        new, changed = change(name, value, actor=by, reason=reason)
    except EhrReleaseError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"{new}" + ("" if changed else " (unchanged)"))


@policy_app.command("releases-root")
def policy_releases_root(
    folder: Annotated[str | None, typer.Argument(
        help="The only folder releases may be published under; omit to show it.")] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who changes it (audited).")] = None,
    reason: Annotated[str | None, typer.Option(help="Why (audited).")] = None,
) -> None:
    """Show or change the site's releases root (stored in the database; every process —
    request, dashboard, publishing flow — checks the same one)."""
    _site_setting("releases_root", folder, by, reason)


@policy_app.command("data-use")
def policy_data_use(
    required: Annotated[str | None, typer.Argument(
        help="on: every request must name recipient, purpose, terms and expiry; off; omit "
             "to show it.")] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who changes it (audited).")] = None,
    reason: Annotated[str | None, typer.Option(help="Why (audited).")] = None,
) -> None:
    """Show or change whether the site requires data-use terms on every request."""
    _site_setting("require_data_use", required, by, reason)


@policy_app.command("approval-window")
def policy_approval_window(
    seconds: Annotated[str | None, typer.Argument(
        help="Seconds a reviewer has to decide a request that names no --approval-timeout; "
             "omit to show it.")] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who changes it (audited).")] = None,
    reason: Annotated[str | None, typer.Option(help="Why (audited).")] = None,
) -> None:
    """Show or change the site's approval window (after it a pending run is rejected)."""
    _site_setting("approval_window", seconds, by, reason)
