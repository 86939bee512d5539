"""The tamper-evident audit trail: append-only, hash-chained events.

Each event stores the hash of the previous event and its own hash over a domain prefix, the
canonical (sorted-key) JSON of its content and the previous hash. Editing, deleting or
re-ordering any row breaks every hash after it, which :func:`verify_chain` detects.

There is deliberately no update or delete function. Writers serialize on a lock (PostgreSQL
advisory lock, SQLite ``BEGIN IMMEDIATE``) and ``prev_hash`` is unique, so concurrent writers
produce one linear chain; a writer that loses a race retries on the new head.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, select

from ehr_release.errors import cap
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import AuditEvent, utc_now

GENESIS = "0" * 64
_DOMAIN = b"ehr_release.audit.v1\x00"
_ADVISORY_LOCK_KEY = 0x45485241  # "EHRA"
_MAX_ATTEMPTS = 20


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same content always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def event_hash(*, seq: int, created_at: str, actor: str, action: str, run_id: str | None,
               payload_json: str, prev_hash: str) -> str:
    """The hash of one event's content chained to its predecessor."""
    content = canonical_json({"seq": seq, "created_at": created_at, "actor": actor,
                              "action": action, "run_id": run_id,
                              "payload": json.loads(payload_json)})
    return hashlib.sha256(_DOMAIN + content.encode() + prev_hash.encode()).hexdigest()


def record_event(*, actor: str, action: str, run_id: str | None = None,
                 payload: dict[str, Any] | None = None,
                 engine: Engine | None = None, session: Session | None = None) -> AuditEvent:
    """Append one event to the chain and return it.

    With ``session`` the event joins that transaction (so a state change and its audit event
    commit or roll back together); otherwise it commits on its own.
    """
    payload_json = canonical_json(_capped(payload or {}))
    if session is not None:
        return _append(session, actor, action, run_id, payload_json)
    engine = engine or get_engine()
    for attempt in range(_MAX_ATTEMPTS):
        try:
            with Session(engine) as s:
                ev = _append(s, actor, action, run_id, payload_json)
                s.commit()
                s.refresh(ev)
                return ev
        except (IntegrityError, OperationalError):
            if attempt == _MAX_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


#: The longest text one payload field may hold: a reviewer's reason fits; a hostile file
#: echoed by some future error message cannot grow the permanent trail without bound.
MAX_PAYLOAD_STRING = 2000


def _capped(value: Any) -> Any:
    """``value`` with every string cut to :data:`MAX_PAYLOAD_STRING` characters."""
    if isinstance(value, str):
        return cap(value, MAX_PAYLOAD_STRING)
    if isinstance(value, dict):
        return {k: _capped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_capped(v) for v in value]
    return value


def _append(s: Session, actor: str, action: str, run_id: str | None,
            payload_json: str) -> AuditEvent:
    if s.get_bind().dialect.name == "postgresql":
        s.exec(text("SELECT pg_advisory_xact_lock(:k)").bindparams(k=_ADVISORY_LOCK_KEY))
    head = s.exec(select(AuditEvent).order_by(col(AuditEvent.seq).desc()).limit(1)).first()
    seq = head.seq + 1 if head else 1
    prev = head.hash if head else GENESIS
    created_at = utc_now()
    ev = AuditEvent(seq=seq, created_at=created_at, actor=actor, action=action, run_id=run_id,
                    payload_json=payload_json, prev_hash=prev,
                    hash=event_hash(seq=seq, created_at=created_at, actor=actor, action=action,
                                    run_id=run_id, payload_json=payload_json, prev_hash=prev))
    s.add(ev)
    s.flush()
    return ev


@dataclass(frozen=True)
class ChainCheck:
    """Result of :func:`verify_chain`: ``ok`` or the first broken event and why."""

    ok: bool
    events: int
    head: str
    problem: str | None = None
    seq: int | None = None


def verify_chain(engine: Engine | None = None) -> ChainCheck:
    """Recompute every hash in order; stop at the first mismatch."""
    prev = GENESIS
    expected_seq = 1
    count = 0
    for ev in iter_events(engine=engine):
        if ev.seq != expected_seq:
            return ChainCheck(False, count, prev, f"event {expected_seq} is missing", ev.seq)
        if ev.prev_hash != prev:
            return ChainCheck(False, count, prev,
                              f"event {ev.seq} points to {ev.prev_hash[:12]}…, expected "
                              f"{prev[:12]}…", ev.seq)
        try:
            recomputed = event_hash(seq=ev.seq, created_at=ev.created_at, actor=ev.actor,
                                    action=ev.action, run_id=ev.run_id,
                                    payload_json=ev.payload_json, prev_hash=ev.prev_hash)
        except json.JSONDecodeError:
            return ChainCheck(False, count, prev, f"event {ev.seq} payload is not JSON", ev.seq)
        if recomputed != ev.hash:
            return ChainCheck(False, count, prev,
                              f"event {ev.seq} ({ev.action}) content does not match its hash",
                              ev.seq)
        prev = ev.hash
        expected_seq += 1
        count += 1
    return ChainCheck(True, count, prev)


def chain_head(engine: Engine | None = None) -> tuple[str, int]:
    """(hash of the newest event, number of events)."""
    with Session(engine or get_engine()) as s:
        head = s.exec(select(AuditEvent).order_by(col(AuditEvent.seq).desc()).limit(1)).first()
        return (head.hash, head.seq) if head else (GENESIS, 0)


def iter_events(run_id: str | None = None, engine: Engine | None = None,
                batch: int = 1000) -> Iterator[AuditEvent]:
    """Events in chain order (optionally of one run), read in batches."""
    last = 0
    with Session(engine or get_engine()) as s:
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
