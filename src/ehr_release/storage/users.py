"""Dashboard users, their credentials and sign-in sessions.

Credentials are random tokens generated for the user (printed once by ``ehr-release users
add``) and stored as Argon2id hashes (argon2-cffi, not hand-rolled crypto). A session is a
second random token; the database keeps only its SHA-256, so a leaked database does not
sign anyone in.

Roles and credentials are trusted only as the audit chain records them
(:mod:`ehr_release.storage.chained`): adding a user and changing a role are chained events,
and a row edited or inserted behind the chain's back signs nobody in with a role it never
recorded.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from ehr_release.core.errors import EhrReleaseError, ParameterError
from ehr_release.storage import chained, throttle
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import append_event, record_event
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.models import User, UserSession, utc_now

if TYPE_CHECKING:
    from argon2 import PasswordHasher

ROLES = ("steward", "reviewer", "auditor")
SESSION_HOURS = 8


@cache
def _hasher() -> PasswordHasher:
    """Argon2, loaded when a credential is made or checked (not for every command)."""
    from argon2 import PasswordHasher

    return PasswordHasher()


@cache
def _dummy_hash() -> str:
    """Checked when the name is unknown or disabled, so such a sign-in costs one Argon2
    verification like any other and its timing does not tell which names exist.

    Made on first sign-in, not at import: every CLI command imports this module, and a
    0.4 s hash would delay even the refusal of a bad input file. Every sign-in calls it,
    found or not, so the one-off cost does not tell names apart either.
    """
    return _hasher().hash(secrets.token_urlsafe(24))


class AuthError(EhrReleaseError):
    """Sign-in refused: unknown user, wrong credential, disabled account, expired session."""


class Throttled(AuthError):
    """Sign-in refused without checking the credential: too many recent failures.

    ``retry_after_s``: whole seconds until the lock ends (the dashboard's ``Retry-After``).
    """

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class SignedIn:
    """Who is behind a request, as the dashboard needs it."""

    user_id: int
    name: str
    role: str
    csrf_token: str


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def add_user(name: str, role: str, *, engine: Engine | None = None) -> str:
    """Create a user and return their credential (shown once, never stored in clear).

    The row and its ``user.added`` event (name, role, the credential hash's digest) commit
    together: the event is what sign-ins read the role from (:mod:`.chained`).
    """
    name = name.strip()
    if not name:
        raise ParameterError("name", "must not be blank", name)
    _check_role(role)
    credential = secrets.token_urlsafe(24)
    stored = _hasher().hash(credential)
    try:
        with Session(_engine(engine)) as s:
            s.add(User(name=name, role=role, credential_hash=stored))
            s.flush()
            append_event(s, actor="system:users", action=AuditAction.USER_ADDED,
                         payload={"name": name, "role": role,
                                  "credential_sha256": chained.credential_digest(stored)})
            s.commit()
    except IntegrityError:
        raise ParameterError("name", "is already a user", name) from None
    return credential


def set_role(name: str, role: str, *, actor: str = "system:users",
             engine: Engine | None = None) -> None:
    """Change a user's role: the row and a ``user.role_changed`` event, together.

    A role edited in the table alone changes nothing: sign-ins read the chain.
    """
    _check_role(role)
    with Session(_engine(engine)) as s:
        user = s.exec(select(User).where(User.name == name.strip())).first()
        if user is None:
            raise ParameterError("name", "is not a user", name)
        user.role = role
        s.add(user)
        append_event(s, actor=actor, action=AuditAction.USER_ROLE_CHANGED,
                     payload={"name": user.name, "role": role})
        s.commit()


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ParameterError("role", f"must be one of {', '.join(ROLES)}", role)


def any_users(engine: Engine | None = None) -> bool:
    """Whether the site has registered users (then every decision needs a credential).

    A row in ``users`` or a user the chain added: deleting the rows does not make the site
    single-user again.
    """
    with Session(_engine(engine)) as s:
        return (s.exec(select(User).limit(1)).first() is not None
                or chained.any_users(s))


def _as_chained(s: Session, user: User | None) -> SignedIn | None:
    """The user as a decision may trust them: enabled, known to the chain with the same
    credential, with the chain's role (the ``role`` column is only a copy)."""
    if user is None or user.disabled or user.id is None:
        return None
    known = chained.users(s).get(user.name)
    if known is None:
        return None
    if (known.credential_sha256 is not None
            and known.credential_sha256 != chained.credential_digest(user.credential_hash)):
        return None
    return SignedIn(user.id, user.name, known.role, "")


def sign_in(name: str, credential: str, *, client: str = "unknown",
            policy: throttle.ThrottlePolicy | None = None,
            engine: Engine | None = None) -> tuple[str, SignedIn]:
    """Check the credential; return a new session token and who signed in (dashboard)."""
    who = authenticate(name, credential, client=client, policy=policy, engine=engine,
                       channel="dashboard")
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    expires = (datetime.now(UTC) + timedelta(hours=SESSION_HOURS)).isoformat(
        timespec="microseconds")
    with Session(_engine(engine)) as s:
        s.add(UserSession(token_sha256=_sha256(token), user_id=who.user_id, csrf_token=csrf,
                          expires_at=expires))
        s.commit()
    return token, replace(who, csrf_token=csrf)


def authenticate(name: str, credential: str, *, client: str = "unknown",
                 policy: throttle.ThrottlePolicy | None = None,
                 engine: Engine | None = None, channel: str = "dashboard") -> SignedIn:
    """Check a user's credential, throttled and audited the same way on every channel.

    Failures are audited and all read the same ("unknown user or wrong credential") so the
    page does not tell an attacker which names exist; an unknown name costs the same Argon2
    check as a known one. Too many failures for the name or from ``client`` lock it out
    (see :mod:`ehr_release.storage.throttle`), audited as ``auth.locked_out``.
    """
    policy = policy or throttle.ThrottlePolicy.from_env()
    actor = name[:120] or "(blank)"
    keys = throttle.subjects(name, client)
    dummy = _dummy_hash()  # before the transaction: the first call hashes (see there)
    with Session(_engine(engine)) as s:
        locked = throttle.reserve(s, keys, policy)
        if locked is not None:
            append_event(s, actor=actor, action=AuditAction.AUTH_REFUSED,
                         payload={"why": "too many failed sign-ins", "scope": locked.scope})
        user = None if locked else s.exec(select(User).where(User.name == name.strip())).first()
        found = _as_chained(s, user)
        stored = user.credential_hash if user and found else dummy
        s.commit()
    if locked is not None:
        raise Throttled("too many failed sign-ins; try again later",
                        retry_after_s=locked.retry_after_s)
    # Argon2 runs outside any transaction: on SQLite one would hold the write lock meanwhile.
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        ok = _hasher().verify(stored, credential) and found is not None
    except (VerificationError, InvalidHashError):
        ok = False
    with Session(_engine(engine)) as s:
        if not ok or found is None:
            newly = throttle.failed(s, keys, policy)
            # Recorded in this session: a second connection would wait on this one's lock.
            append_event(s, actor=actor, action=AuditAction.AUTH_REFUSED,
                         payload={"why": "unknown user or wrong credential"})
            for scope in newly:
                append_event(s, actor=actor, action=AuditAction.AUTH_LOCKED_OUT, payload={
                    "scope": scope, "client": client if scope == throttle.CLIENT else None,
                    "failures": policy.limit(scope), "seconds": policy.lockout_s})
            s.commit()
            raise AuthError("unknown user or wrong credential")
        throttle.succeeded(s, keys, policy)
        s.commit()
    record_event(actor=found.name, action=AuditAction.AUTH_SIGNED_IN,
                 payload={"role": found.role, "channel": channel}, engine=engine)
    return found


def session_user(token: str | None, *, engine: Engine | None = None) -> SignedIn | None:
    """Who holds this session token, or None if it is unknown or expired."""
    if not token:
        return None
    with Session(_engine(engine)) as s:
        row = s.get(UserSession, _sha256(token))
        if row is None or row.expires_at <= utc_now():
            return None
        who = _as_chained(s, s.get(User, row.user_id))
        return None if who is None else replace(who, csrf_token=row.csrf_token)


def sign_out(token: str | None, *, engine: Engine | None = None) -> None:
    if not token:
        return
    with Session(_engine(engine)) as s:
        row = s.get(UserSession, _sha256(token))
        if row is not None:
            s.delete(row)
            s.commit()


def check_csrf(who: SignedIn, sent: str | None) -> bool:
    """Constant-time comparison of the form's token with the session's."""
    return bool(sent) and secrets.compare_digest(who.csrf_token, sent or "")
