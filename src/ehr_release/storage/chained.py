"""Facts a decision takes from the audit chain, never from a column anyone can edit.

Why: ``release_runs.requester`` and ``users.role`` are plain rows. An insider with database
access set the requester of their own run to another name (and their own role to reviewer),
approved it, and put the columns back; every check had read the columns. The chain's events
are authenticated with the audit key (:mod:`ehr_release.storage.audit`), which such an
insider does not hold, so:

* a run's requester is the actor of its ``run.requested`` event;
* a user's role is the one of their newest ``user.added`` / ``user.role_changed`` event, and
  their credential must be the one that event recorded (its hash's SHA-256);
* a site "has users" once the chain has added one — deleting every ``users`` row does not
  turn it back into a single-user site where names are taken as given.

Each event read here is checked against its authenticator; an event that does not verify is
ignored (``audit verify`` names it). A legacy unkeyed (v1) event counts only if it was written
before the first keyed one: an unkeyed event after that is a forgery (a downgrade). Those
rules are :class:`ehr_release.storage.chain_auth.EventAuthenticator`'s, which ``status``
also applies to rows it reads without SQLAlchemy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ehr_release.storage.actions import AuditAction
from ehr_release.storage.chain_auth import (
    KEYED_LIKE,
    EventAuthenticator,
    audit_keyring,
    first_authentic_actors,
)
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.models import AuditEvent

USER_EVENTS = (AuditAction.USER_ADDED, AuditAction.USER_ROLE_CHANGED)


@dataclass(frozen=True)
class ChainedUser:
    """A user as the chain knows them: role and (if recorded) their credential's digest."""

    name: str
    role: str
    credential_sha256: str | None
    seq: int


def credential_digest(credential_hash: str) -> str:
    """What the chain records of a credential: the SHA-256 of its stored Argon2 hash.

    It tells whether ``users.credential_hash`` was swapped, and nothing about the credential
    (a 192-bit random token behind Argon2).
    """
    return hashlib.sha256(credential_hash.encode()).hexdigest()


def _checker(session: Session) -> EventAuthenticator:
    """The authenticator of single events of the chain ``session`` reads."""
    first = session.exec(select(AuditEvent.seq).where(col(AuditEvent.hash).like(KEYED_LIKE))
                         .order_by(col(AuditEvent.seq)).limit(1)).first()
    return EventAuthenticator(audit_keyring(), first)


def requesters(session: Session, run_ids: Iterable[str]) -> dict[str, str]:
    """run id → the actor of its authentic ``run.requested`` event (runs without one are
    left out)."""
    wanted = sorted(set(run_ids))
    if not wanted:
        return {}
    rows = session.exec(select(AuditEvent)
                        .where(AuditEvent.action == AuditAction.RUN_REQUESTED.value)
                        .where(col(AuditEvent.run_id).in_(wanted))
                        .order_by(col(AuditEvent.seq))).all()
    return first_authentic_actors(rows, _checker(session))


def requesters_of(run_ids: Iterable[str], engine: Engine | None = None) -> dict[str, str]:
    """:func:`requesters` in a session of its own (``list``'s column)."""
    with Session(_engine(engine)) as s:
        return requesters(s, run_ids)


def requester(run_id: str, engine: Engine | None = None) -> str | None:
    """Who requested ``run_id`` according to the chain; None if no authentic event says."""
    return requesters_of([run_id], engine).get(run_id)


def users(session: Session) -> dict[str, ChainedUser]:
    """name → the user as the chain's authentic user events leave them (newest wins)."""
    check = _checker(session)
    found: dict[str, ChainedUser] = {}
    rows = session.exec(select(AuditEvent)
                        .where(col(AuditEvent.action).in_([a.value for a in USER_EVENTS]))
                        .order_by(col(AuditEvent.seq))).all()
    for ev in rows:
        if not check.authentic(ev):
            continue
        payload = json.loads(ev.payload_json)
        name, role = payload.get("name"), payload.get("role")
        if not isinstance(name, str) or not isinstance(role, str):
            continue
        before = found.get(name)
        digest = payload.get("credential_sha256") or (before.credential_sha256 if before
                                                      else None)
        if ev.action == AuditAction.USER_ROLE_CHANGED and before is None:
            continue  # a role change of a user the chain never added
        found[name] = ChainedUser(name, role, digest, ev.seq)
    return found


def any_users(session: Session) -> bool:
    """Whether the chain has ever added a user (authentic ``user.added``)."""
    check = _checker(session)
    rows = session.exec(select(AuditEvent)
                        .where(AuditEvent.action == AuditAction.USER_ADDED.value)
                        .order_by(col(AuditEvent.seq))).all()
    return any(check.authentic(ev) for ev in rows)


@dataclass(frozen=True)
class ChainedDecision:
    """Where the chain leaves a run: its last status and the decision event, if any."""

    status: str | None
    decider: str | None
    decision: str | None
    requester: str | None


def decision_of(run_id: str, engine: Engine | None = None) -> ChainedDecision:
    """The run's last authentic ``run.<status>`` event, its decision and its requester.

    Publishing asks this rather than ``release_runs.status`` and ``approvals``: a run set
    to ``approved`` and given an approvals row by hand has no ``run.approved`` event the
    audit key vouches for.
    """
    status = decider = decision = requested_by = None
    with Session(_engine(engine)) as s:
        check = _checker(s)
        rows = s.exec(select(AuditEvent).where(AuditEvent.run_id == run_id)
                      .order_by(col(AuditEvent.seq))).all()
        for ev in rows:
            if not ev.action.startswith("run.") or not check.authentic(ev):
                continue
            if ev.action == AuditAction.RUN_REQUESTED:
                requested_by = requested_by or ev.actor
                status = "requested"
                continue
            if ev.action == AuditAction.RUN_RESUMED:
                continue
            status = ev.action.removeprefix("run.")
            payload = json.loads(ev.payload_json)
            if "decision" in payload:
                decider = str(payload.get("reviewer", ev.actor))
                decision = str(payload["decision"])
    return ChainedDecision(status, decider, decision, requested_by)
