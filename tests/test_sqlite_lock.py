"""SQLite locked by another process mid-run: the run fails with the database's message,
publishes nothing, and the same request resumes and publishes once the lock is gone."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading

import pytest

from ehr_release import registry
from ehr_release.governance.integrity import check_integrity
from ehr_release.storage import runs
from ehr_release.storage.engine import BUSY_TIMEOUT_ENV, database_url, reset_engines
from ehr_release.storage.runs import Status
from tests import doubles
from tests.flow_helpers import decide, request_for, start, wait_status

pytestmark = pytest.mark.slow


def test_sqlite_locked_mid_run(env, monkeypatch) -> None:
    data, out = env
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "1")  # fail after 1 s instead of 30
    reset_engines()
    db_file = database_url().removeprefix("sqlite:///")
    locked = threading.Event()
    holder: dict = {}

    def evaluate_then_lock(files, dataset, params, rng):
        # Another process's writer takes the database and does not let go.
        conn = sqlite3.connect(db_file, timeout=5, isolation_level=None,
                               check_same_thread=False)
        conn.execute("BEGIN EXCLUSIVE")
        holder["conn"] = conn
        locked.set()
        return doubles.CODE_COUNTS.evaluate(files, dataset, params, rng)

    table = dict(registry._entries())
    table["code-counts"] = dataclasses.replace(doubles.CODE_COUNTS, evaluate=evaluate_then_lock)
    monkeypatch.setattr(registry, "_entries", lambda: table)
    request = request_for(data, out)
    try:
        thread, box = start(request)
        thread.join(180)
        assert locked.is_set()
        error = box.get("error")
        assert error is not None and "database is locked" in str(error), box
        assert not (out / "releases").exists()
    finally:
        if "conn" in holder:
            holder["conn"].execute("ROLLBACK")
            holder["conn"].close()
    # Nothing could be written while locked (not even "failed"): the run shows where it
    # stopped, and the chain is whole.
    assert runs.get_run(request.run_id).status == Status.VERIFIED
    assert check_integrity()[0] == []

    monkeypatch.setattr(registry, "_entries", lambda: {**table, "code-counts":
                                                       doubles.CODE_COUNTS})
    thread, box = start(request)  # the same request resumes
    assert wait_status(request.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL
    decide(request.run_id, "approve")
    thread.join(180)
    assert box.get("result") == "published", box
    assert check_integrity()[0] == []


def test_busy_timeout_setting_is_checked(monkeypatch) -> None:
    from ehr_release.core.errors import ConfigError
    from ehr_release.storage.engine import _busy_timeout_s

    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigError, match=BUSY_TIMEOUT_ENV):
        _busy_timeout_s()
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "0")
    with pytest.raises(ConfigError, match="between 0 and 3600"):
        _busy_timeout_s()
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "2.5")
    assert _busy_timeout_s() == 2.5
