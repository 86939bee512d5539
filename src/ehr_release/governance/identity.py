"""Who may do what: the four-eyes rule and the identity behind a command-line decision.

One function holds the four-eyes rule (:mod:`ehr_release.storage.four_eyes`, re-exported
here), so the command line, the dashboard and the database's own refusal cannot drift apart.
On a site with registered users, every decision and request made on the command line needs
that user's credential and role, exactly as in the dashboard; a site with no users keeps
single-user behaviour (names are taken as given), and the certificate says which channel and
role decided.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from ehr_release.storage import users
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.four_eyes import same_person  # noqa: F401  (re-exported)

CREDENTIAL_ENV = "EHR_RELEASE_CREDENTIAL"
REVIEWER_CREDENTIAL_ENV = "EHR_RELEASE_REVIEWER_CREDENTIAL"
SINGLE_USER = "cli (single-user site: no users registered, name not authenticated)"


def has_terminal() -> bool:
    """Whether someone can be asked: standard input and error are a terminal.

    A hidden prompt without one (a script, ``$(...)`` in a pipeline, a CI job) either hangs,
    reads the next line of piped data as a credential, or ends in getpass's echo warning
    and an empty abort; such a command is refused instead, naming the variable to set.
    """
    return sys.stdin.isatty() and sys.stderr.isatty()


@dataclass(frozen=True)
class Identity:
    """A person acting on the command line: name, checked role (None on a single-user
    site) and the channel, as the certificate prints it."""

    name: str
    role: str | None
    channel: str


def cli_identity(name: str, role: str, *, credential_env: str = CREDENTIAL_ENV,
                 prompt: Callable[[str], str] | None = None) -> Identity:
    """Authenticate ``name`` for an action that needs ``role``.

    The credential comes from ``credential_env`` or, when unset, ``prompt`` (hidden input)
    when there is a terminal to ask on; otherwise one line names the variable to set.
    Wrong credential, lock-out and wrong role are refused and audited like a dashboard
    sign-in. Without registered users, nobody can be authenticated: the name is taken as
    given and the channel says so.
    """
    if not users.any_users():
        return Identity(name, None, SINGLE_USER)
    credential = os.environ.get(credential_env)
    if credential is None:
        if prompt is None or not has_terminal():
            raise users.AuthError(f"{name} must sign in: this site has registered users "
                                  f"(`ehr-release users add`); set {credential_env} to "
                                  f"{name}'s credential (no terminal to ask on)")
        credential = prompt(f"credential of {name}")
        if not credential:
            raise users.AuthError(f"no credential was entered for {name}; type it at the "
                                  f"prompt or set {credential_env}")
    who = users.authenticate(name, credential, client="cli", channel="cli")
    if who.role != role:
        record_event(actor=who.name, action=AuditAction.AUTH_REFUSED,
                     payload={"why": f"role {who.role} may not act as {role}",
                              "channel": "cli"})
        raise users.AuthError(f"user {who.name!r} is a {who.role}; this needs a {role}")
    return Identity(who.name, who.role, "cli")
