"""The database disappears mid-run: the run fails cleanly, publishes nothing, and work goes
on once the database is back (PostgreSQL: connections refused and severed mid-flow)."""

from __future__ import annotations

import dataclasses

import pytest
import sqlalchemy as sa

from ehr_release import registry
from ehr_release.governance.integrity import check_integrity
from ehr_release.storage import runs
from ehr_release.storage.engine import reset_engines
from ehr_release.storage.runs import Status
from tests import doubles
from tests.conftest import PG_ADMIN_URL
from tests.flow_helpers import request_for, run_approved, start

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _set_connections(db: str, allowed: bool) -> None:
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS {str(allowed).lower()}'))
        if not allowed:
            conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": db})
    admin.dispose()


def test_postgres_outage_mid_run(env, pg_url, monkeypatch) -> None:
    data, out = env
    monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", pg_url)
    reset_engines()
    db = pg_url.rsplit("/", 1)[1]

    def evaluate_then_lose_database(files, dataset, params, rng):
        _set_connections(db, allowed=False)
        return doubles.CODE_COUNTS.evaluate(files, dataset, params, rng)

    table = dict(registry._entries())
    table["code-counts"] = dataclasses.replace(doubles.CODE_COUNTS,
                                               evaluate=evaluate_then_lose_database)
    monkeypatch.setattr(registry, "_entries", lambda: table)
    request = request_for(data, out)
    try:
        thread, box = start(request)
        thread.join(180)
        error = box.get("error")
        assert error is not None, box
        assert "not currently accepting connections" in str(error) or \
            "terminating connection" in str(error), error
        assert not (out / "releases").exists()
    finally:
        _set_connections(db, allowed=True)

    # Back: the interrupted run can be resumed with the same request and publishes once.
    assert runs.get_run(request.run_id).status in {Status.VERIFIED, Status.FAILED}
    monkeypatch.setattr(registry, "_entries", lambda: {**table, "code-counts":
                                                       doubles.CODE_COUNTS})
    if runs.get_run(request.run_id).status == Status.FAILED:
        request = request_for(data, out)
    box = run_approved(request, timeout=180)
    assert box.get("result") == "published", box
    assert check_integrity()[0] == []
