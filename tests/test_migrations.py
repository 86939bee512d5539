"""The schema under Alembic: migrated equals the models, old databases adopted, first use
by many processes at once (issue 33 part 4)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlmodel import SQLModel

from ehr_release.storage import engine as engine_mod
from ehr_release.storage import models, pending  # noqa: F401  (register the tables)
from ehr_release.storage.migrate import MIGRATIONS, alembic_config, current_revision
from ehr_release.storage.migrations import HEAD

SRC = Path(__file__).resolve().parents[1] / "src"


def _schema_drift(engine: sa.Engine) -> list:
    with engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)


def test_head_constant_is_the_newest_revision():
    """``HEAD`` (the fast path's "nothing to do") names the last revision in versions/."""
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_current_head() == HEAD
    assert Path(script.dir) == MIGRATIONS


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migrated_schema_equals_the_models(backend, ehr_home, request):
    """A model change without its migration fails here (on both databases)."""
    url = (f"sqlite:///{ehr_home / 'fresh.sqlite'}" if backend == "sqlite"
           else request.getfixturevalue("pg_url"))
    engine = engine_mod.get_engine(url)
    assert current_revision(engine) == HEAD
    assert _schema_drift(engine) == []
    assert "alembic_version" in sa.inspect(engine).get_table_names()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_create_all_database_is_adopted(backend, ehr_home, request):
    """A database made by ``create_all`` before migrations (here without the newest table,
    ``extract_links``, and holding a user) is upgraded in place: data kept, table added,
    stamped at head."""
    url = (f"sqlite:///{ehr_home / 'old.sqlite'}" if backend == "sqlite"
           else request.getfixturevalue("pg_url"))
    ehr_home.mkdir(parents=True, exist_ok=True)
    raw = sa.create_engine(url)
    old = [t for t in SQLModel.metadata.sorted_tables if t.name != "extract_links"]
    SQLModel.metadata.create_all(raw, tables=old)
    with raw.begin() as conn:
        conn.execute(models.User.__table__.insert().values(
            name="alice", role="steward", credential_hash="x", created_at="2026-01-01",
            disabled=False))
    raw.dispose()
    engine = engine_mod.get_engine(url)
    assert current_revision(engine) == HEAD
    assert _schema_drift(engine) == []
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT name FROM users")).scalars().all() == ["alice"]


# A process that opens a fresh database together with others and records a run and an event.
_WORKER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from ehr_release.storage import runs
    from ehr_release.storage.audit import record_event
    from ehr_release.storage.models import DatasetRecord
    go = Path(sys.argv[1])
    while not go.exists():
        time.sleep(0.01)
    run_id = f"rel-concurrent-{sys.argv[2]}"
    runs.create_run(run_id=run_id, requester="steward", algorithm="disassociation",
                    parameters={"k": 2}, out_dir="/tmp/out",
                    dataset=DatasetRecord(fingerprint="f" * 64, rows=1, codes=1,
                                          columns_json="{}", source="x"))
    record_event(actor="steward", action="test.concurrent", run_id=run_id)
""")


def _first_use_together(url: str, home: Path, n: int = 8) -> list[subprocess.CompletedProcess]:
    go = home / "go"
    env = {**os.environ, "EHR_RELEASE_DATABASE_URL": url, "EHR_RELEASE_HOME": str(home),
           "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(go), str(i)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    time.sleep(3)  # let all of them import, then release them together
    go.touch()
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=180), *p.communicate())
            for p in procs]


def _exception_line(stderr: str) -> str:
    """The exception a worker died of (SQLAlchemy ends its message with a link line, which
    is all the last line showed when this once failed under load in CI)."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    named = [line for line in lines if re.match(r"^[\w.]+(Error|Exception)\b", line)]
    return (named or lines or ["(no output)"])[-1]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_eight_first_uses_at_once_all_succeed(backend, ehr_home, request):
    """8 processes open a fresh database at the same moment; each records its run and an
    audit event. Before migrations, 7 of 8 died creating the tables twice (PostgreSQL)."""
    url = (f"sqlite:///{ehr_home / 'together.sqlite'}" if backend == "sqlite"
           else request.getfixturevalue("pg_url"))
    ehr_home.mkdir(parents=True, exist_ok=True)
    done = _first_use_together(url, ehr_home)
    failed = [_exception_line(p.stderr) for p in done if p.returncode != 0]
    assert failed == []

    from ehr_release.storage.audit import verify_chain

    engine = engine_mod.get_engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM release_runs")).scalar_one() == 8
        assert conn.execute(sa.text(
            "SELECT count(*) FROM audit_events WHERE action = 'test.concurrent'")
        ).scalar_one() == 8
    assert verify_chain(engine).ok
    assert _schema_drift(engine) == []
