"""When an approval window closes and when a flow's lease lapses: time rules, no database.

The rows they judge (``pending_releases``, ``run_leases``: see
:mod:`ehr_release.storage.pending`) are read through SQLModel by most callers and with the
standard library by ``status`` and ``list`` (:mod:`ehr_release.storage.sqlite_read`); both
judge them here, so the two can never disagree about a stalled run or an overdue window.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ehr_release.storage.run_status import TRANSITIONS, Status

#: How often a working flow renews its lease, and when a lease counts as lost.
LEASE_RENEW_S = 5.0
LEASE_STALE_S = 45.0


class WindowRow(Protocol):
    """What the rules read of a ``pending_releases`` row."""

    @property
    def expires_at(self) -> str: ...


class LeaseRow(Protocol):
    """What the rules read of a ``run_leases`` row."""

    @property
    def host(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def renewed_at(self) -> str: ...


def expiry(timeout_s: int) -> str:
    """When an approval window opened now closes (ISO-8601 UTC, like every timestamp)."""
    return (datetime.now(UTC) + timedelta(seconds=timeout_s)).isoformat(timespec="seconds")


def is_expired(row: WindowRow, now: datetime | None = None) -> bool:
    return (now or datetime.now(UTC)) >= datetime.fromisoformat(row.expires_at)


def expires_now(row: WindowRow, run_status: str, now: datetime | None = None) -> bool:
    """Whether looking at the run now must reject it: its window closed and its status still
    allows the move to ``rejected`` (a decided or failed run keeps its old window row)."""
    return is_expired(row, now) and Status.REJECTED in TRANSITIONS[Status(run_status)]


def lease_is_live(lease: LeaseRow | None, now: datetime | None = None) -> bool:
    """True while some process renews the lease.

    A holder on this machine whose process is gone lost its lease at once (SIGKILL, OOM
    killer); one elsewhere after :data:`LEASE_STALE_S` without renewal.
    """
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
