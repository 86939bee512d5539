"""Dashboard users, their credentials and sign-in sessions.

Credentials are random tokens generated for the user (printed once by ``ehr-release users
add``) and stored as Argon2id hashes (argon2-cffi, not hand-rolled crypto). A session is a
second random token; the database keeps only its SHA-256, so a leaked database does not
sign anyone in.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from ehr_release.errors import EhrReleaseError, ParameterError
from ehr_release.storage.audit import record_event
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import User, UserSession, utc_now

ROLES = ("steward", "reviewer", "auditor")
SESSION_HOURS = 8
_HASHER = PasswordHasher()


class AuthError(EhrReleaseError):
    """Sign-in refused: unknown user, wrong credential, disabled account, expired session."""


@dataclass(frozen=True)
class SignedIn:
    """Who is behind a request, as the dashboard needs it."""

    user_id: int
    name: str
    role: str
    csrf_token: str


def _engine(engine: Engine | None) -> Engine:
    return engine or get_engine()


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def add_user(name: str, role: str, *, engine: Engine | None = None) -> str:
    """Create a user and return their credential (shown once, never stored in clear)."""
    name = name.strip()
    if not name:
        raise ParameterError("name", "must not be blank", name)
    if role not in ROLES:
        raise ParameterError("role", f"must be one of {', '.join(ROLES)}", role)
    credential = secrets.token_urlsafe(24)
    try:
        with Session(_engine(engine)) as s:
            s.add(User(name=name, role=role, credential_hash=_HASHER.hash(credential)))
            s.commit()
    except IntegrityError:
        raise ParameterError("name", "is already a user", name) from None
    record_event(actor="system:users", action="user.added", payload={"name": name, "role": role},
                 engine=engine)
    return credential


def sign_in(name: str, credential: str, *, engine: Engine | None = None) -> tuple[str, SignedIn]:
    """Check the credential; return a new session token and who signed in.

    Failures are audited and all read the same ("unknown user or wrong credential") so the
    page does not tell an attacker which names exist.
    """
    with Session(_engine(engine)) as s:
        user = s.exec(select(User).where(User.name == name.strip())).first()
        ok = False
        if user is not None and not user.disabled:
            try:
                ok = _HASHER.verify(user.credential_hash, credential)
            except (VerificationError, InvalidHashError):
                ok = False
        if not ok or user is None or user.id is None:
            # Recorded in this session: a second connection would wait on this one's lock.
            record_event(actor=name[:120] or "(blank)", action="auth.refused",
                         payload={"why": "unknown user or wrong credential"}, session=s)
            s.commit()
            raise AuthError("unknown user or wrong credential")
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        expires = (datetime.now(UTC) + timedelta(hours=SESSION_HOURS)).isoformat(
            timespec="microseconds")
        s.add(UserSession(token_sha256=_sha256(token), user_id=user.id, csrf_token=csrf,
                          expires_at=expires))
        s.commit()
        who = SignedIn(user.id, user.name, user.role, csrf)
    record_event(actor=who.name, action="auth.signed_in", payload={"role": who.role},
                 engine=engine)
    return token, who


def session_user(token: str | None, *, engine: Engine | None = None) -> SignedIn | None:
    """Who holds this session token, or None if it is unknown or expired."""
    if not token:
        return None
    with Session(_engine(engine)) as s:
        row = s.get(UserSession, _sha256(token))
        if row is None or row.expires_at <= utc_now():
            return None
        user = s.get(User, row.user_id)
        if user is None or user.disabled or user.id is None:
            return None
        return SignedIn(user.id, user.name, user.role, row.csrf_token)


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
