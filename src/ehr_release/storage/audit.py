"""The tamper-evident audit trail: append-only events in a chain keyed with a site secret.

Each event stores the hash of the previous event and its own authenticator over a domain
prefix, the canonical (sorted-key) JSON of its content and the previous hash. Editing,
deleting or re-ordering any row breaks every link after it, which :func:`verify_chain`
detects.

**Keyed (v2).** The authenticator is ``HMAC-SHA256(audit key, …)``, stored as
``v2:<key id>:<52 hex digits>`` (208 bits; the column holds 64 characters). The audit key is
kept outside the database like the pseudonym key (:mod:`ehr_release.storage.site_keys`):
``EHR_RELEASE_AUDIT_KEY`` (hex, ≥ 32 bytes) or ``audit.key`` in the home, created 0600 on
first use. Someone who can write the database but not read the key cannot recompute a valid
chain after rewriting a row; deleting the newest events is caught by the anchors kept outside
the database, written for every event (:mod:`ehr_release.storage.anchors`).

**Legacy (v1).** Events written before the key existed carry a plain SHA-256 (64 hex digits)
and still verify as such. A v1 event after a v2 one is a downgrade and fails verification;
a chain rewritten entirely as v1 contradicts the anchor written at the first keyed event.

The authenticators themselves and the keyring are computed in
:mod:`ehr_release.storage.chain_auth` (no database library), which readers of single events
share.

**Rotation.** :func:`rotate_audit_key` records an ``audit.key_rotated`` event, authenticated
with the old key and naming the new key's id, then installs the new key and keeps the old one
under ``audit-keys/<id>.key`` (or, with keys from the environment, in
``EHR_RELEASE_AUDIT_RETIRED_KEYS``). Every event names its key id, so old events verify with
their key; a key that no rotation event announced is refused.

There is deliberately no update or delete function. Writers serialize on a lock (PostgreSQL
advisory lock, SQLite ``BEGIN IMMEDIATE``) and ``prev_hash`` is unique, so concurrent writers
produce one linear chain; a writer that loses a race retries on the new head.
"""

from __future__ import annotations

import csv
import hmac
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, select

from ehr_release.core.canonical import canonical_json
from ehr_release.core.errors import ConfigError, cap
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.anchors import anchor_on_commit
from ehr_release.storage.chain_auth import (  # the authenticators; names re-exported here
    AUDIT_KEY_ENV,
    AUDIT_KEY_FILE,
    KEY_PURPOSE,
    RETIRED_KEYS_DIR,
    RETIRED_KEYS_ENV,
    audit_key,
    audit_keyring,
    event_hash,
    hash_version,
)
from ehr_release.storage.engine import engine_or_default, home
from ehr_release.storage.models import AuditEvent, utc_now
from ehr_release.storage.site_keys import key_id, parse_key, write_new_key

GENESIS = "0" * 64
KEY_ROTATED = AuditAction.AUDIT_KEY_ROTATED
_ADVISORY_LOCK_KEY = 0x45485241  # "EHRA"
_MAX_ATTEMPTS = 20


def rotate_audit_key(new_key: bytes | None = None, engine: Engine | None = None) -> str:
    """Switch the chain to a new audit key; return the new key's id.

    First an ``audit.key_rotated`` event is written, authenticated with the old key and naming
    the new key's id — so the switch itself is part of the chain the old key vouches for.
    With a key file, the old key is then kept as ``audit-keys/<old id>.key`` and the new one
    replaces ``audit.key``. With ``EHR_RELEASE_AUDIT_KEY`` the caller must pass ``new_key``,
    then set it as ``EHR_RELEASE_AUDIT_KEY`` and add the old key to
    ``EHR_RELEASE_AUDIT_RETIRED_KEYS`` (this process cannot change the environment of others).
    """
    from_env = bool(os.environ.get(AUDIT_KEY_ENV))
    if from_env and new_key is None:
        raise ConfigError(f"{AUDIT_KEY_ENV} is set: pass the new key explicitly, then set it "
                          f"there and list the old key in {RETIRED_KEYS_ENV}")
    old = audit_key()
    assert old is not None
    old_id = key_id(old, KEY_PURPOSE)
    secret = new_key if new_key is not None else os.urandom(32)
    parse_key(secret.hex(), "new audit key", "audit key")  # same length rule as loaded keys
    new_id = key_id(secret, KEY_PURPOSE)
    if new_id == old_id:
        raise ConfigError("the new audit key is the current one")
    folder = home()
    if not from_env:
        retired = folder / RETIRED_KEYS_DIR
        retired.mkdir(mode=0o700, exist_ok=True)
        write_new_key(retired / f"{old_id}.key", old)
    record_event(actor="system:audit", action=KEY_ROTATED, engine=engine, _key=old,
                 payload={"previous_key_id": old_id, "new_key_id": new_id})
    if not from_env:
        staged = folder / f".{AUDIT_KEY_FILE}.new"
        staged.unlink(missing_ok=True)
        write_new_key(staged, secret)
        os.replace(staged, folder / AUDIT_KEY_FILE)
    return new_id


# ----------------------------------------------------------------------------- writing
# Storage's one convention for sessions: a function either owns its transaction — it takes
# ``engine=`` (default: the configured engine) and opens ``with Session(engine)`` — or joins
# the caller's — it takes the open ``Session`` as its first argument and never commits.
# record_event owns one; append_event joins one, so that a state change and its audit event
# commit or roll back together.
def record_event(*, actor: str, action: AuditAction | str, run_id: str | None = None,
                 payload: dict[str, Any] | None = None,
                 engine: Engine | None = None, _key: bytes | None = None) -> AuditEvent:
    """Append one event to the chain in a transaction of its own, and return it.

    A writer that loses the race for the chain head retries on the new head. The audit key
    is read (or created) before the chain lock is taken.
    """
    payload_json = canonical_json(capped(payload or {}))
    key = _key if _key is not None else _current_key()
    engine = engine_or_default(engine)
    for attempt in range(_MAX_ATTEMPTS):
        try:
            with Session(engine) as s:
                ev = _append(s, actor, action, run_id, payload_json, key)
                s.commit()
                s.refresh(ev)
                return ev
        except (IntegrityError, OperationalError):
            if attempt == _MAX_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def append_event(session: Session, *, actor: str, action: AuditAction | str,
                 run_id: str | None = None,
                 payload: dict[str, Any] | None = None) -> AuditEvent:
    """Append one event inside ``session``'s open transaction (the caller commits).

    The event commits or rolls back with whatever else the transaction holds; the chain lock
    is held until then.
    """
    return _append(session, actor, action, run_id, canonical_json(capped(payload or {})),
                   _current_key())


def _current_key() -> bytes:
    key = audit_key()
    assert key is not None  # created on first use
    return key


#: The longest text one payload field may hold: a reviewer's reason fits; a hostile file
#: echoed by some future error message cannot grow the permanent trail without bound.
MAX_PAYLOAD_STRING = 2000


def capped(value: Any) -> Any:
    """``value`` with every string cut to :data:`MAX_PAYLOAD_STRING` characters."""
    if isinstance(value, str):
        return cap(value, MAX_PAYLOAD_STRING)
    if isinstance(value, dict):
        return {k: capped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [capped(v) for v in value]
    return value


def lock_chain(s: Session) -> None:
    """Take the chain's write lock in ``s``'s transaction; it is held until that ends.

    PostgreSQL: a transaction-scoped advisory lock (taking it again is harmless). SQLite:
    every transaction begins with ``BEGIN IMMEDIATE`` (:mod:`~ehr_release.storage.engine`),
    the database's write lock, so beginning the transaction is enough. Besides
    :func:`_append`, a writer whose check and append must be one step takes it first, so that
    what it reads cannot change before its event commits (the ε reservation:
    :mod:`~ehr_release.storage.budget`).
    """
    s.connection()  # begins the transaction (on SQLite: BEGIN IMMEDIATE)
    if s.get_bind().dialect.name == "postgresql":
        s.exec(text("SELECT pg_advisory_xact_lock(:k)").bindparams(k=_ADVISORY_LOCK_KEY))


def _append(s: Session, actor: str, action: AuditAction | str, run_id: str | None,
            payload_json: str, key: bytes) -> AuditEvent:
    lock_chain(s)
    head = s.exec(select(AuditEvent).order_by(col(AuditEvent.seq).desc()).limit(1)).first()
    seq = head.seq + 1 if head else 1
    prev = head.hash if head else GENESIS
    created_at = utc_now()
    ev = AuditEvent(seq=seq, created_at=created_at, actor=actor, action=action, run_id=run_id,
                    payload_json=payload_json, prev_hash=prev,
                    hash=event_hash(seq=seq, created_at=created_at, actor=actor, action=action,
                                    run_id=run_id, payload_json=payload_json, prev_hash=prev,
                                    key=key))
    s.add(ev)
    s.flush()
    # Every event is anchored outside the database once it commits: deleting any event from
    # the end then leaves the chain short of the head file (storage/anchors.py).
    anchor_on_commit(s, seq, ev.hash)
    return ev


@dataclass(frozen=True)
class ChainCheck:
    """Result of :func:`verify_chain`: ``ok`` or the first broken event and why.

    ``events`` counts the events verified (all of them when ``ok``), ``legacy`` how many of
    those are unkeyed v1 events, ``key_ids`` the audit keys the chain uses.
    """

    ok: bool
    events: int
    head: str
    problem: str | None = None
    seq: int | None = None
    legacy: int = 0
    key_ids: tuple[str, ...] = field(default_factory=tuple)


def verify_chain(engine: Engine | None = None, *, keys: dict[str, bytes] | None = None,
                 visit: Callable[[AuditEvent], None] | None = None) -> ChainCheck:
    """Re-check every link and authenticator in order; stop at the first problem.

    ``keys`` defaults to :func:`audit_keyring`. ``visit`` is called with every event that
    verified, in order (``audit verify`` builds its cross-checks from it in the same pass).
    Refused: a gap in ``seq``, a broken link, a hash in no known form, a v1 event after a v2
    one (downgrade), a key the site does not hold or that no rotation event announced, and
    content that does not match its authenticator.
    """
    keyring = audit_keyring() if keys is None else keys
    prev = GENESIS
    expected_seq = 1
    count = legacy = 0
    announced: set[str] = set()
    used: list[str] = []

    def broken(ev: AuditEvent, why: str) -> ChainCheck:
        return ChainCheck(False, count, prev, why, ev.seq, legacy, tuple(used))

    for ev in iter_events(engine=engine):
        if ev.seq != expected_seq:
            return broken(ev, f"event {expected_seq} is missing")
        if ev.prev_hash != prev:
            return broken(ev, f"event {ev.seq} points to {ev.prev_hash[:12]}…, expected "
                              f"{prev[:12]}…")
        version, kid = hash_version(ev.hash)
        if version == 0:
            return broken(ev, f"event {ev.seq} has a hash in no known form")
        if version == 1 and used:
            return broken(ev, f"event {ev.seq} ({ev.action}) is unkeyed (v1) after keyed "
                              "events: a downgrade, written without the audit key")
        key = None
        if version == 2:
            assert kid is not None
            if kid not in keyring:
                return broken(ev, f"event {ev.seq} is signed with audit key {kid}, which this "
                                  f"site does not hold (set {AUDIT_KEY_ENV} or restore "
                                  f"{RETIRED_KEYS_DIR}/{kid}.key)")
            if used and kid not in announced:
                return broken(ev, f"event {ev.seq} is signed with audit key {kid}, which no "
                                  f"{KEY_ROTATED} event announced")
            key = keyring[kid]
        try:
            recomputed = event_hash(seq=ev.seq, created_at=ev.created_at, actor=ev.actor,
                                    action=ev.action, run_id=ev.run_id,
                                    payload_json=ev.payload_json, prev_hash=ev.prev_hash,
                                    key=key)
        except json.JSONDecodeError:
            return broken(ev, f"event {ev.seq} payload is not JSON")
        if not hmac.compare_digest(recomputed, ev.hash):
            return broken(ev, f"event {ev.seq} ({ev.action}) content does not match its hash")
        if kid is not None:
            if not used:
                announced.add(kid)
            if kid not in used:
                used.append(kid)
            if ev.action == KEY_ROTATED:
                announced.add(str(json.loads(ev.payload_json).get("new_key_id")))
        else:
            legacy += 1
        if visit is not None:
            visit(ev)
        prev = ev.hash
        expected_seq += 1
        count += 1
    return ChainCheck(True, count, prev, legacy=legacy, key_ids=tuple(used))


def chain_head(engine: Engine | None = None) -> tuple[str, int]:
    """(hash of the newest event, number of events)."""
    with Session(engine_or_default(engine)) as s:
        head = s.exec(select(AuditEvent).order_by(col(AuditEvent.seq).desc()).limit(1)).first()
        return (head.hash, head.seq) if head else (GENESIS, 0)


def iter_events(run_id: str | None = None, engine: Engine | None = None,
                batch: int = 1000) -> Iterator[AuditEvent]:
    """Events in chain order (optionally of one run), read in batches."""
    last = 0
    with Session(engine_or_default(engine)) as s:
        while True:
            q = select(AuditEvent).where(AuditEvent.seq > last)
            if run_id is not None:
                q = q.where(AuditEvent.run_id == run_id)
            rows = s.exec(q.order_by(col(AuditEvent.seq)).limit(batch)).all()
            if not rows:
                return
            yield from rows
            last = rows[-1].seq


EXPORT_FIELDS = ["seq", "created_at", "actor", "action", "run_id", "payload_json",
                 "prev_hash", "hash"]


def export_events(run_id: str | None, fmt: str, engine: Engine | None = None) -> str:
    """The events of a run (or all) as JSON Lines or CSV text."""
    rows = [{f: getattr(ev, f) for f in EXPORT_FIELDS} for ev in iter_events(run_id, engine)]
    if fmt == "jsonl":
        return "".join(canonical_json({**{k: v for k, v in r.items() if k != "payload_json"},
                                       "payload": json.loads(r["payload_json"])}) + "\n"
                       for r in rows)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=EXPORT_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()
    raise ValueError(f"unknown export format {fmt!r}; expected jsonl or csv")
