"""Sign-in throttling and lockout, kept in the database.

Why: without it an attacker may guess credentials as fast as Argon2 allows, and a restart
of the dashboard would forgive every failure. Failures are counted per *user name* (as typed,
known or not — locking only known names would tell which names exist) and per *client*
(address), each within a window; reaching the limit locks that name or client for a while.

An attempt *reserves* its failure before the credential is checked and gives it back on
success, so a burst of parallel requests cannot all slip past the limit while Argon2 runs.
Rows are keyed by a SHA-256 of scope and subject, so a credential mistyped into the name
field is not stored in clear.

Limits come from the environment (see :class:`ThrottlePolicy`); defaults are in the README.
A refused attempt learns how long its lock lasts (:class:`Locked`), so the dashboard's 429
can say ``Retry-After``. Who the *client* is, is the caller's to establish: the dashboard
uses the socket's address unless the site names trusted proxies
(:func:`ehr_release.dashboard.security.client_address`).
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete
from sqlmodel import Session, col, select

from ehr_release.core.errors import ConfigError
from ehr_release.storage.models import SignInThrottle

USER, CLIENT = "user", "client"
_ENV = {"max_failures_per_user": "EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_USER",
        "max_failures_per_client": "EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_CLIENT",
        "window_s": "EHR_RELEASE_SIGNIN_WINDOW_S",
        "lockout_s": "EHR_RELEASE_SIGNIN_LOCKOUT_S"}


@dataclass(frozen=True)
class ThrottlePolicy:
    """How many failed sign-ins a user name or a client may have within ``window_s`` seconds
    before it is locked out for ``lockout_s`` seconds."""

    max_failures_per_user: int = 5
    max_failures_per_client: int = 20
    window_s: int = 900
    lockout_s: int = 900

    @classmethod
    def from_env(cls) -> ThrottlePolicy:
        """The defaults, overridden by ``EHR_RELEASE_SIGNIN_*`` variables (positive integers)."""
        values: dict[str, int] = {}
        for field, var in _ENV.items():
            raw = os.environ.get(var)
            if raw is None:
                continue
            try:
                values[field] = int(raw)
            except ValueError:
                raise ConfigError(f"{var} must be a positive integer") from None
            if values[field] < 1:
                raise ConfigError(f"{var} must be a positive integer")
        return cls(**values)

    def limit(self, scope: str) -> int:
        return self.max_failures_per_user if scope == USER else self.max_failures_per_client


@dataclass(frozen=True)
class Locked:
    """A refused attempt: which key is locked, and whole seconds until it may try again."""

    scope: str
    retry_after_s: int


def subjects(name: str, client: str) -> dict[str, str]:
    """The throttle keys of one attempt: the typed name (trimmed, case-folded) and client."""
    return {USER: name.strip().casefold(), CLIENT: client}


def reserve(s: Session, keys: dict[str, str], policy: ThrottlePolicy,
            now: datetime | None = None) -> Locked | None:
    """Count one attempt against every key, unless one is locked: then return that lock.

    Rows are locked for the rest of ``s``'s transaction; commit soon after. Rows untouched
    for longer than a window and a lockout are deleted first: they can no longer lock
    anything, and random names typed by an attacker would otherwise pile up.
    """
    now = now or datetime.now(UTC)
    stale = now - timedelta(seconds=policy.window_s + policy.lockout_s)
    s.exec(delete(SignInThrottle).where(
        col(SignInThrottle.updated_at) < stale.isoformat(timespec="microseconds")))
    rows = {scope: _locked_row(s, scope, subject, policy, now) for scope, subject in keys.items()}
    locked = [scope for scope, row in rows.items()
              if row.locked_until is not None or row.failures >= policy.limit(scope)]
    if locked:  # come back when every lock has ended
        return Locked(locked[0], max(_seconds_left(rows[scope], policy, now)
                                     for scope in locked))
    for row in rows.values():
        row.failures += 1
        row.updated_at = now.isoformat(timespec="microseconds")
        s.add(row)
    return None


def failed(s: Session, keys: dict[str, str], policy: ThrottlePolicy,
           now: datetime | None = None) -> list[str]:
    """The reserved attempt failed: lock every key that reached its limit; return their scopes."""
    now = now or datetime.now(UTC)
    newly: list[str] = []
    for scope, subject in keys.items():
        row = _locked_row(s, scope, subject, policy, now)
        if row.locked_until is None and row.failures >= policy.limit(scope):
            row.locked_until = (now + timedelta(seconds=policy.lockout_s)).isoformat(
                timespec="microseconds")
            row.updated_at = now.isoformat(timespec="microseconds")
            s.add(row)
            newly.append(scope)
    return newly


def succeeded(s: Session, keys: dict[str, str], policy: ThrottlePolicy,
              now: datetime | None = None) -> None:
    """The reserved attempt succeeded: the user's count starts over, the client's gives back
    the one reserved (its other failures may have been guesses at other names)."""
    now = now or datetime.now(UTC)
    for scope, subject in keys.items():
        row = _locked_row(s, scope, subject, policy, now)
        row.failures = 0 if scope == USER else max(0, row.failures - 1)
        s.add(row)


def _seconds_left(row: SignInThrottle, policy: ThrottlePolicy, now: datetime) -> int:
    """Whole seconds until ``row``'s lock ends (at least 1). A key at its limit but not yet
    locked is one whose failing attempts are still being checked: its lock, when they end,
    lasts a full lockout."""
    if row.locked_until is None:
        return policy.lockout_s
    left = (datetime.fromisoformat(row.locked_until) - now).total_seconds()
    return max(1, math.ceil(left))


def _key(scope: str, subject: str) -> str:
    return hashlib.sha256(f"{scope}\x00{subject}".encode()).hexdigest()


def _locked_row(s: Session, scope: str, subject: str, policy: ThrottlePolicy,
                now: datetime) -> SignInThrottle:
    """The key's row, created if missing and locked against concurrent sign-ins (PostgreSQL
    ``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already serializes writers), with an
    expired window or lockout cleared."""
    key = _key(scope, subject)
    stamp = now.isoformat(timespec="microseconds")
    # The dialect's own upsert, imported here: a command that never signs in (``list``,
    # ``status``) does not load PostgreSQL's dialect to read a SQLite site.
    if s.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    s.exec(insert(SignInThrottle).values(key_sha256=key, scope=scope, failures=0,
                                         window_started_at=stamp, updated_at=stamp)
           .on_conflict_do_nothing(index_elements=["key_sha256"]))
    row = s.exec(select(SignInThrottle).where(SignInThrottle.key_sha256 == key)
                 .with_for_update().execution_options(populate_existing=True)).one()
    lock_over = row.locked_until is not None and datetime.fromisoformat(row.locked_until) <= now
    window_over = (row.locked_until is None and datetime.fromisoformat(row.window_started_at)
                   + timedelta(seconds=policy.window_s) <= now)
    if lock_over or window_over:
        row.failures, row.locked_until, row.window_started_at = 0, None, stamp
    return row
