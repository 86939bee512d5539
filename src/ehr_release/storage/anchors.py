"""Anchors of the audit chain outside the database: an append-only head file in the home.

The keyed chain (:mod:`ehr_release.storage.audit`) stops anyone without the audit key from
rewriting events, but deleting the newest events leaves a shorter chain that is still valid.
So at the moments that matter — a run reaching ``awaiting_approval``, ``approved``,
``rejected``, ``published`` or ``failed``, the first keyed event, a key rotation — the head
of the chain (seq and hash) is appended to ``audit-heads.log`` in the home. ``audit verify``
then insists the chain still holds every anchored event with the same hash: deleting events
after an anchor, or rewriting the chain under it, is reported as truncation.

One line per anchor: ``seq hash time database``, where ``database`` names the database URL
(SHA-256 of it without the password, 16 hex digits) so a home used against two databases does
not mix their chains. The file is opened ``O_APPEND`` (one ``write`` per line, never
rewritten) with mode 0600. The line is written only after the transaction commits: an anchor
of an event that was rolled back would later look like truncation.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session

from ehr_release.storage.engine import home
from ehr_release.storage.models import AuditEvent, utc_now

HEADS_FILE = "audit-heads.log"
#: Run statuses whose transition writes an anchor (the decision points and the ends).
ANCHORED_STATUSES = frozenset({"awaiting_approval", "approved", "rejected", "published",
                               "failed"})
_PENDING = "ehr_release.pending_anchors"
_HOOKED = "ehr_release.anchor_hooks"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Anchor:
    """One head-file entry: the chain had event ``seq`` with ``hash`` at time ``at``."""

    seq: int
    hash: str
    at: str
    line: int


def heads_path() -> Path:
    return home() / HEADS_FILE


def database_id(engine: Engine) -> str:
    """Which database an anchor belongs to: a digest of its URL, never the password."""
    url = engine.url.render_as_string(hide_password=True)
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def append_anchor(engine: Engine, seq: int, hash_: str) -> None:
    """Append one anchor line (append-only, owner-only); a failure is logged, not raised.

    The event it names is already committed, so failing the caller would not undo anything;
    a missing anchor only means one less point ``audit verify`` can check.
    """
    line = f"{seq} {hash_} {utc_now()} {database_id(engine)}\n".encode("ascii")
    try:
        fd = os.open(heads_path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("could not append audit anchor %s to %s: %s", seq, HEADS_FILE, exc)


def anchor_on_commit(session: Session, seq: int, hash_: str) -> None:
    """Anchor event ``seq`` once ``session`` commits; forget it if the session rolls back."""
    session.info.setdefault(_PENDING, []).append((seq, hash_))
    if not session.info.get(_HOOKED):
        event.listen(session, "after_commit", _write_pending)
        event.listen(session, "after_rollback", _drop_pending)
        event.listen(session, "after_soft_rollback", _drop_pending_soft)
        session.info[_HOOKED] = True


def anchor_status(session: Session, recorded: AuditEvent, status: str) -> None:
    """Anchor ``recorded`` (a run's move to ``status``) if ``status`` is an anchored one."""
    if status in ANCHORED_STATUSES:
        anchor_on_commit(session, recorded.seq, recorded.hash)


def _write_pending(session: Session) -> None:
    pending = session.info.pop(_PENDING, [])
    if not pending:
        return
    bind = session.get_bind()
    engine = getattr(bind, "engine", bind)
    for seq, hash_ in pending:
        append_anchor(engine, seq, hash_)


def _drop_pending(session: Session) -> None:
    session.info.pop(_PENDING, None)


def _drop_pending_soft(session: Session, _previous_transaction: object) -> None:
    session.info.pop(_PENDING, None)


def read_anchors(engine: Engine) -> list[Anchor]:
    """This database's anchors in file order; a torn (half-written) line is skipped."""
    path = heads_path()
    if not path.exists():
        return []
    mine = database_id(engine)
    anchors = []
    for number, raw in enumerate(path.read_text(encoding="ascii", errors="replace")
                                 .splitlines(), start=1):
        parts = raw.split()
        if len(parts) != 4 or not parts[0].isdigit() or parts[3] != mine:
            continue
        anchors.append(Anchor(int(parts[0]), parts[1], parts[2], number))
    return anchors
