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
When a window closes and when a lease lapses are rules of their own
(:mod:`ehr_release.storage.deadlines`); this module reads and writes the rows.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from ehr_release.storage.deadlines import LEASE_RENEW_S, lease_is_live
from ehr_release.storage.deadlines import expiry as expiry  # re-exported: the bundle's name
from ehr_release.storage.deadlines import is_expired as is_expired  # and the service's
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.models import PendingRelease, RunLease, utc_now


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
    """True while some process renews the run's lease (the rule:
    :func:`ehr_release.storage.deadlines.lease_is_live`)."""
    with Session(_engine(engine)) as s:
        return lease_is_live(s.get(RunLease, run_id), now)


def pending_runs(engine: Engine | None = None) -> list[PendingRelease]:
    with Session(_engine(engine)) as s:
        return list(s.exec(select(PendingRelease)).all())
