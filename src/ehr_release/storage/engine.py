"""The database engine: SQLite under ``.ehr_release/`` by default, any URL by environment.

``EHR_RELEASE_DATABASE_URL`` selects the database (e.g. ``postgresql+psycopg://…``);
``EHR_RELEASE_HOME`` moves the default working folder (database, Prefect home, logs).
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlmodel import SQLModel, create_engine

from ehr_release.storage import models  # noqa: F401  (registers the tables)

DATABASE_URL_ENV = "EHR_RELEASE_DATABASE_URL"
HOME_ENV = "EHR_RELEASE_HOME"


def home() -> Path:
    """The working folder for local state; created on first use."""
    path = Path(os.environ.get(HOME_ENV, ".ehr_release")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_url() -> str:
    return os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{home() / 'ehr_release.db'}"


_ENGINES: dict[str, Engine] = {}


def get_engine(url: str | None = None) -> Engine:
    """The engine for ``url`` (default: :func:`database_url`), tables created if missing."""
    url = url or database_url()
    if url not in _ENGINES:
        _ENGINES[url] = _create(url)
    return _ENGINES[url]


def _create(url: str) -> Engine:
    if url.startswith("sqlite"):
        db_file = make_url(url).database
        if db_file and db_file != ":memory:":
            Path(db_file).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin_immediate)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    SQLModel.metadata.create_all(engine)
    return engine


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
    # Let SQLAlchemy, not pysqlite, decide when transactions begin (see _sqlite_begin_immediate).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _sqlite_begin_immediate(conn) -> None:  # type: ignore[no-untyped-def]
    # Take the write lock at BEGIN, so two writers serialize instead of both reading the
    # same chain head and one failing at COMMIT.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def reset_engines() -> None:
    """Dispose and forget cached engines (tests switch databases between cases)."""
    for engine in _ENGINES.values():
        engine.dispose()
    _ENGINES.clear()
