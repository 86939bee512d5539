"""Durable approval state: what a run awaiting a decision needs, and who is working on it.

A run awaiting approval holds no process. Everything its publication needs is persisted when
the release flow ends: the candidate files (in the home, their hashes pinned in
``release_runs``' artifacts), and here the reports the certificate is re-rendered from, the
request's data-use terms and when the approval window closes. A recorded decision then
starts the publishing flow, in whatever process records it — CLI, dashboard or a Prefect
deployment run — so pending reviews survive server stops, reboots and a move of the Prefect
server.

A run whose flow is working holds a *lease*, renewed every few seconds by a thread of the
flow's process. A run that is neither settled nor leased has a flow that died: it is shown as
``stalled`` with the command that resumes it, instead of keeping its last status forever.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.models import PendingRelease, RunLease, utc_now

#: How often a working flow renews its lease, and when a lease counts as lost.
LEASE_RENEW_S = 5.0
LEASE_STALE_S = 45.0


def save_pending(row: PendingRelease, engine: Engine | None = None) -> None:
    """Insert or replace a run's bundle (a resumed run re-certifies and saves it again)."""
    with Session(_engine(engine)) as s:
        existing = s.get(PendingRelease, row.run_id)
        if existing is not None:
            s.delete(existing)
            s.flush()
        s.add(row)
        s.commit()


def get_pending(run_id: str, engine: Engine | None = None) -> PendingRelease | None:
    with Session(_engine(engine)) as s:
        return s.get(PendingRelease, run_id)


def expiry(timeout_s: int) -> str:
    """When an approval window opened now closes (ISO-8601 UTC, like every timestamp)."""
    return (datetime.now(UTC) + timedelta(seconds=timeout_s)).isoformat(timespec="seconds")


def is_expired(row: PendingRelease, now: datetime | None = None) -> bool:
    return (now or datetime.now(UTC)) >= datetime.fromisoformat(row.expires_at)


def _renew(run_id: str, holder: str, engine: Engine) -> None:
    with Session(engine) as s:
        lease = s.get(RunLease, run_id) or RunLease(
            run_id=run_id, holder=holder, host=socket.gethostname(), pid=os.getpid(),
            renewed_at=utc_now())
        lease.holder, lease.renewed_at = holder, utc_now()
        lease.host, lease.pid = socket.gethostname(), os.getpid()
        s.add(lease)
        s.commit()


def _drop(run_id: str, engine: Engine) -> None:
    with Session(engine) as s:
        lease = s.get(RunLease, run_id)
        if lease is not None:
            s.delete(lease)
            s.commit()


@contextmanager
def hold_lease(run_id: str, holder: str, engine: Engine | None = None) -> Iterator[None]:
    """Keep ``run_id``'s lease alive while the block runs; drop it when the block ends.

    ``holder`` names the flow for people reading the table; host and process id are added.

    A renewal that fails (database briefly away) is skipped: the next one catches up, and a
    lease that really lapses only makes ``status`` say ``stalled`` — it never blocks work.
    """
    engine = _engine(engine)
    _renew(run_id, holder, engine)
    stop = threading.Event()

    def renew_forever() -> None:
        while not stop.wait(LEASE_RENEW_S):
            with suppress(Exception):  # see docstring: a missed renewal is fine
                _renew(run_id, holder, engine)

    thread = threading.Thread(target=renew_forever, name=f"lease-{run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=LEASE_RENEW_S)
        with suppress(Exception):  # a leftover lease simply goes stale
            _drop(run_id, engine)


def lease_alive(run_id: str, engine: Engine | None = None,
                now: datetime | None = None) -> bool:
    """True while some process renews the run's lease.

    A holder on this machine whose process is gone lost its lease at once (SIGKILL, OOM
    killer); one elsewhere after :data:`LEASE_STALE_S` without renewal.
    """
    with Session(_engine(engine)) as s:
        lease = s.get(RunLease, run_id)
    if lease is None:
        return False
    if lease.host == socket.gethostname() and not _process_exists(lease.pid):
        return False
    age = (now or datetime.now(UTC)) - datetime.fromisoformat(lease.renewed_at)
    return age.total_seconds() < LEASE_STALE_S


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def pending_runs(engine: Engine | None = None) -> list[PendingRelease]:
    with Session(_engine(engine)) as s:
        return list(s.exec(select(PendingRelease)).all())
