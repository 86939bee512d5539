"""Rows of the SQLite database read with the standard library, read-only.

Why: ``status`` and ``list`` are asked often and must answer in a fraction of a second
(issue 37 goal 3); importing SQLModel, SQLAlchemy and Pydantic alone takes ≈ 0.6 s of CPU,
:mod:`sqlite3` 0.02 s. So these reads are made here, and only when they would read exactly
what the full path (:mod:`ehr_release.storage.engine`) would: the configured URL is a plain
``sqlite:///FILE``, the file exists and is private (the full path would tighten a looser
one), and its schema is at this version's Alembic head (the full path would migrate an older
one). Otherwise :func:`open_rows` yields None and the caller takes the full path.

The file is opened with ``mode=ro`` and ``PRAGMA query_only``: nothing here can write. The
rows come back as plain objects with the ORM's attribute names, so the rules
(:mod:`~ehr_release.storage.run_view`, :mod:`~ehr_release.storage.deadlines`,
:mod:`~ehr_release.storage.chain_auth`) take them as they take the ORM's.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ehr_release.storage.actions import AuditAction
from ehr_release.storage.home import database_url
from ehr_release.storage.migrations import HEAD

#: How long a read waits for a writer's lock before the full path is taken instead.
BUSY_TIMEOUT_S = 2.0
_URL_PREFIX = "sqlite:///"
_RUN_COLUMNS = ("id, dataset_id, requester, algorithm, parameters_json, status, out_dir, "
                "flow_run_id, error, created_at, updated_at")
_EVENT_COLUMNS = "seq, created_at, actor, action, run_id, payload_json, prev_hash, hash"


def database_file(url: str) -> Path | None:
    """The file a plain ``sqlite:///FILE`` URL names; None for any other URL (PostgreSQL, a
    driver, query options, in memory), which only SQLAlchemy is trusted to read."""
    if not url.startswith(_URL_PREFIX) or "?" in url:
        return None
    path = url.removeprefix(_URL_PREFIX)
    return Path(path) if path and path != ":memory:" else None


@contextmanager
def open_rows() -> Iterator[Rows | None]:
    """The configured database's rows, read-only; None when the full path must read them."""
    path = database_file(database_url())
    if path is None or not path.is_file() or path.stat().st_mode & 0o077:
        yield None
        return
    uri = f"{path.resolve().as_uri()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S,
                                 isolation_level=None)) as conn:
        conn.execute("PRAGMA query_only=1")
        conn.execute("BEGIN")  # one snapshot for every read (never committed: nothing written)
        conn.row_factory = _plain_row
        head = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        yield Rows(conn) if [r.version_num for r in head] == [HEAD] else None


def _plain_row(cursor: sqlite3.Cursor, values: tuple[Any, ...]) -> SimpleNamespace:
    return SimpleNamespace(**{d[0]: v for d, v in zip(cursor.description, values, strict=True)})


class Rows:
    """The queries ``status``, ``list`` and run-id prefixes need, one method per question."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def _all(self, sql: str, *params: Any) -> list[Any]:
        return self._conn.execute(sql, params).fetchall()

    def _one(self, sql: str, *params: Any) -> Any | None:
        found = self._all(sql, *params)
        return found[0] if found else None

    def run(self, run_id: str) -> Any | None:
        return self._one(f"SELECT {_RUN_COLUMNS} FROM release_runs WHERE id = ?", run_id)

    def runs(self, limit: int) -> list[Any]:
        """The newest runs first, as ``storage.runs.list_runs`` orders them."""
        return self._all(f"SELECT {_RUN_COLUMNS} FROM release_runs ORDER BY created_at DESC "
                         "LIMIT ?", limit)

    def run_ids_starting(self, prefix: str, limit: int) -> list[str]:
        """Run ids starting with ``prefix`` (its ``%``, ``_`` and ``/`` taken literally)."""
        escaped = prefix.replace("/", "//").replace("%", "/%").replace("_", "/_")
        rows = self._all("SELECT id FROM release_runs WHERE id LIKE ? || '%' ESCAPE '/' "
                         "ORDER BY id LIMIT ?", escaped, limit)
        return [r.id for r in rows]

    def window(self, run_id: str) -> Any | None:
        """The run's approval window (``pending_releases.expires_at``), if it has one."""
        return self._one("SELECT expires_at FROM pending_releases WHERE run_id = ?", run_id)

    def windows(self) -> list[Any]:
        """Every approval window with its run's status (a window without a run is skipped:
        there is nothing to expire)."""
        return self._all("SELECT p.expires_at, r.status FROM pending_releases p "
                         "JOIN release_runs r ON r.id = p.run_id")

    def lease(self, run_id: str) -> Any | None:
        return self._one("SELECT host, pid, renewed_at FROM run_leases WHERE run_id = ?",
                         run_id)

    def latest_verification(self, run_id: str) -> dict[str, Any] | None:
        row = self._one("SELECT report_json FROM verification_results WHERE run_id = ? "
                        "ORDER BY id DESC LIMIT 1", run_id)
        return json.loads(row.report_json) if row else None

    def approval(self, run_id: str) -> Any | None:
        return self._one("SELECT reviewer, decision, reason, decided_at FROM approvals "
                         "WHERE run_id = ? LIMIT 1", run_id)

    def requested_events(self, run_ids: list[str]) -> list[Any]:
        """The runs' ``run.requested`` events in chain order (authentic or not: judged by
        :class:`~ehr_release.storage.chain_auth.EventAuthenticator`)."""
        marks = ", ".join("?" * len(run_ids))
        return self._all(f"SELECT {_EVENT_COLUMNS} FROM audit_events WHERE action = ? AND "
                         f"run_id IN ({marks}) ORDER BY seq", AuditAction.RUN_REQUESTED.value,
                         *run_ids) if run_ids else []

    def first_keyed(self) -> int | None:
        """The ``seq`` of the chain's first keyed (v2) event."""
        from ehr_release.storage.chain_auth import KEYED_LIKE  # hmac: not for run-id prefixes

        row = self._one("SELECT seq FROM audit_events WHERE hash LIKE ? ORDER BY seq LIMIT 1",
                        KEYED_LIKE)
        return row.seq if row else None
