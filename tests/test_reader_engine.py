"""Status polls read without SQLite's write lock (:func:`ehr_release.storage.engine.get_reader`).

Before: every transaction began ``IMMEDIATE``, polls included, so each CLI waiting for its
run took the home's one write lock every 0.2 s and the flows' writes queued behind them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import OperationalError

from ehr_release.storage.engine import BUSY_TIMEOUT_ENV, get_engine, get_reader, reset_engines


@pytest.fixture
def quick_lock(ehr_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home whose writes give up on a held lock after 1 s (not 30)."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "1")
    reset_engines()
    return ehr_home


def test_a_write_waits_for_no_open_read(quick_lock) -> None:
    writer, reader = get_engine(), get_reader()
    with reader.connect() as polling, polling.begin():
        assert polling.exec_driver_sql("SELECT count(*) FROM alembic_version").scalar() == 1
        with writer.begin() as conn:  # would wait 1 s, then fail, behind an IMMEDIATE read
            conn.exec_driver_sql("CREATE TABLE scratch (x INTEGER)")
            conn.exec_driver_sql("INSERT INTO scratch VALUES (1)")
    with reader.connect() as polling, polling.begin():
        assert polling.exec_driver_sql("SELECT x FROM scratch").scalar() == 1


def test_an_open_read_of_the_writers_engine_does_block_a_write(quick_lock) -> None:
    """The contrast that makes the test above mean something: the writer's own reads lock."""
    writer = get_engine()
    with writer.connect() as reading, reading.begin():
        reading.exec_driver_sql("SELECT count(*) FROM alembic_version").scalar()
        other = sa.create_engine(str(writer.url), connect_args={"timeout": 1})
        with pytest.raises(OperationalError, match="locked"), other.begin() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        other.dispose()


def test_the_reader_cannot_write(quick_lock) -> None:
    with pytest.raises(OperationalError) as caught, get_reader().begin() as conn:
        conn.exec_driver_sql("CREATE TABLE scratch (x INTEGER)")
    assert isinstance(caught.value.orig, sqlite3.OperationalError)
    assert "readonly" in str(caught.value.orig)


def test_other_databases_read_through_the_writers_engine(pg_url) -> None:
    assert get_reader(pg_url) is get_engine(pg_url)


def test_an_in_memory_database_reads_through_the_writers_engine() -> None:
    url = "sqlite://"
    try:
        assert get_reader(url) is get_engine(url)
    finally:
        reset_engines()
