"""Anchors of the audit chain outside the database: append-only head files.

The keyed chain (:mod:`ehr_release.storage.audit`) stops anyone without the audit key from
rewriting events, but deleting the newest events leaves a shorter chain that is still valid.
So **every** committed event's seq and hash is appended to ``audit-heads.log`` in the home,
right after its transaction commits. ``audit verify`` then insists that the chain still holds
every anchored event with the same hash, and that the chain's newest event is anchored: with
each event anchored, no event — a refusal, a sign-in, an ε reservation, a whole pending run —
can be deleted from the end without the chain falling short of the head file. A keyed chain
without its head file fails too: the file's absence is itself evidence of tampering.

Why each commit, not only a run's status changes: anchors at decision points left every later
event (``approval.refused``, ``auth.refused``, ``epsilon.reserved``, ``user.added``, …)
deletable unnoticed. The cost is one ``write`` per commit (measured in docs/reliability.md).

**A second place outside the home.** Someone holding the database *and* the home can rewrite
both. A site can keep a copy of every head line elsewhere: ``EHR_RELEASE_ANCHOR_DIR`` names a
folder (another file system, a mount the release system may append to but its operators
cannot rewrite) that gets the same ``audit-heads.log`` and is checked the same way; with
``EHR_RELEASE_ANCHOR_SYSLOG=1`` each line also goes to syslog (facility ``auth``), for a log
host to keep — ``audit verify`` cannot read syslog back, the site compares it.

One line per anchor: ``seq hash time database``, where ``database`` names the database URL
(SHA-256 of it without the password, 16 hex digits) so a home used against two databases does
not mix their chains. The file is opened ``O_APPEND`` (one ``write`` per transaction, never
rewritten) with mode 0600. Lines are written only after the transaction commits: an anchor
of an event that was rolled back would later look like truncation. A process killed between
its commit and its line leaves the newest event unanchored until the next event is written
(its anchor covers the one before, through the chain's link).
"""

from __future__ import annotations

import hashlib
import logging
import os
import syslog
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session

from ehr_release.storage.engine import home
from ehr_release.storage.models import utc_now

HEADS_FILE = "audit-heads.log"
#: A folder outside the home that receives a copy of every head line (checked like the home's).
ANCHOR_DIR_ENV = "EHR_RELEASE_ANCHOR_DIR"
#: ``1``: every head line also goes to syslog (write-only: the site compares it).
ANCHOR_SYSLOG_ENV = "EHR_RELEASE_ANCHOR_SYSLOG"
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


def anchor_paths() -> list[Path]:
    """Every head file this site keeps: the home's, then the site's second place if set."""
    paths = [heads_path()]
    extra = os.environ.get(ANCHOR_DIR_ENV, "").strip()
    if extra:
        paths.append(Path(extra).expanduser() / HEADS_FILE)
    return paths


def database_id(engine: Engine) -> str:
    """Which database an anchor belongs to: a digest of its URL, never the password."""
    url = engine.url.render_as_string(hide_password=True)
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def append_anchor(engine: Engine, seq: int, hash_: str) -> None:
    """Append one anchor line to every head file; see :func:`append_anchors`."""
    append_anchors(engine, [(seq, hash_)])


def append_anchors(engine: Engine, heads: list[tuple[int, str]]) -> None:
    """Append anchor lines (append-only, owner-only, one ``write`` per file); a failure is
    logged, not raised.

    The events they name are already committed, so failing the caller would not undo
    anything; a missing line is reported by ``audit verify`` until a later event's anchor
    covers it.
    """
    now, db = utc_now(), database_id(engine)
    lines = "".join(f"{seq} {hash_} {now} {db}\n" for seq, hash_ in heads).encode("ascii")
    for path in anchor_paths():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, lines)
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("could not append audit anchor %s to %s: %s", heads[-1][0], path, exc)
    if os.environ.get(ANCHOR_SYSLOG_ENV, "").strip() == "1":
        for line in lines.decode("ascii").splitlines():
            syslog.syslog(syslog.LOG_AUTH | syslog.LOG_INFO, f"ehr-release audit-head {line}")


def anchor_on_commit(session: Session, seq: int, hash_: str) -> None:
    """Anchor event ``seq`` once ``session`` commits; forget it if the session rolls back."""
    session.info.setdefault(_PENDING, []).append((seq, hash_))
    if not session.info.get(_HOOKED):
        event.listen(session, "after_commit", _write_pending)
        event.listen(session, "after_rollback", _drop_pending)
        event.listen(session, "after_soft_rollback", _drop_pending_soft)
        session.info[_HOOKED] = True


def _write_pending(session: Session) -> None:
    pending = session.info.pop(_PENDING, [])
    if not pending:
        return
    bind = session.get_bind()
    append_anchors(getattr(bind, "engine", bind), pending)


def _drop_pending(session: Session) -> None:
    session.info.pop(_PENDING, None)


def _drop_pending_soft(session: Session, _previous_transaction: object) -> None:
    session.info.pop(_PENDING, None)


def read_anchors(engine: Engine, path: Path | None = None) -> list[Anchor]:
    """This database's anchors in file order (the home's file unless ``path``); a torn
    (half-written) line is skipped."""
    path = path or heads_path()
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
