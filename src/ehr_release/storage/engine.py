"""The database engine: SQLite in the per-user home by default, any URL by environment.

``EHR_RELEASE_DATABASE_URL`` selects the database (e.g. ``postgresql+psycopg://…``);
``EHR_RELEASE_HOME`` moves the working folder (database, Prefect home, logs), which is
otherwise the user's platform data directory (see :func:`home`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlmodel import create_engine

from ehr_release.core.errors import ConfigError
from ehr_release.storage import models  # noqa: F401  (registers the tables)
from ehr_release.storage.home import (
    APP_NAME,
    DATABASE_URL_ENV,
    HOME_ENV,
    database_url,
    default_home,
    home,
)

#: The home and the database URL live in storage.home (no SQLAlchemy there).
__all__ = ["APP_NAME", "DATABASE_URL_ENV", "HOME_ENV", "database_url", "default_home", "home"]

BUSY_TIMEOUT_ENV = "EHR_RELEASE_SQLITE_BUSY_TIMEOUT_S"


_ENGINES: dict[str, Engine] = {}
#: Key prefix of a URL's read-only engine in ``_ENGINES`` (:func:`get_reader`).
READER_PREFIX = "reader:"
#: One engine per URL even when threads ask at once (each would migrate, in turn, for nothing).
_ENGINES_LOCK = threading.Lock()


def get_engine(url: str | None = None) -> Engine:
    """The engine for ``url`` (default: :func:`database_url`), its schema migrated to head."""
    url = url or database_url()
    with _ENGINES_LOCK:
        if url not in _ENGINES:
            _ENGINES[url] = _create(url)
        return _ENGINES[url]


def get_reader(url: str | None = None) -> Engine:
    """An engine for reads that never write: the status polls of a command waiting for its
    run (:func:`ehr_release.service.wait_for_status`).

    Why: every transaction of :func:`get_engine` on SQLite begins ``IMMEDIATE`` (it takes
    the write lock, so two writers serialize instead of one failing at COMMIT). A status
    poll began the same way, so each CLI waiting for its run (every 0.2 s) held the one
    write lock in turn, and the flows' writes queued behind the polls; in WAL mode a read
    needs no lock. This engine begins its transactions deferred and opens its connections
    with ``PRAGMA query_only``: a write through it fails instead of taking the lock. Other
    databases (and an in-memory SQLite, which a second engine would not see) read through
    :func:`get_engine`'s engine, under their own isolation.
    """
    url = url or database_url()
    writer = get_engine(url)  # created (and migrated) first: a reader never migrates
    if not url.startswith("sqlite") or _sqlite_file(url) is None:
        return writer
    key = READER_PREFIX + url
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            reader = _sqlite_engine(url)
            event.listen(reader, "connect", _sqlite_reader_pragmas)
            event.listen(reader, "begin", _sqlite_begin_deferred)
            _ENGINES[key] = reader
        return _ENGINES[key]


def engine_or_default(engine: Engine | None) -> Engine:
    """The engine a storage function was given, else the configured one."""
    return engine or get_engine()


def _create(url: str) -> Engine:
    if url.startswith("sqlite"):
        db_file = _sqlite_file(url)
        if db_file is not None:
            Path(db_file).parent.mkdir(parents=True, exist_ok=True)
            _private_file(Path(db_file))
        engine = _sqlite_engine(url)
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin_immediate)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    from ehr_release.storage.migrate import migrate

    migrate(engine)  # Alembic ``upgrade head`` under a lock (concurrent first use)
    return engine


def _sqlite_file(url: str) -> str | None:
    """The file of a SQLite URL; None for an in-memory database."""
    db_file = make_url(url).database
    return db_file if db_file and db_file != ":memory:" else None


def _sqlite_engine(url: str) -> Engine:
    """A SQLite engine as the writer's and the reader's connections share it: usable from
    the flow's threads, waiting for another process's lock up to the busy timeout."""
    return create_engine(url, connect_args={"check_same_thread": False,
                                            "timeout": _busy_timeout_s()})


def _private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if missing, else tighten it to 0600.

    SQLite creates its ``-wal`` and ``-shm`` files with the main file's permissions.
    """
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)


def _busy_timeout_s() -> float:
    """How long a write waits for another process's SQLite lock before failing (seconds).

    ``EHR_RELEASE_SQLITE_BUSY_TIMEOUT_S`` (default 30): long enough for concurrent writers
    to take turns, short enough that a stuck lock fails the run instead of hanging it.
    """
    raw = os.environ.get(BUSY_TIMEOUT_ENV, "30")
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{BUSY_TIMEOUT_ENV} must be a number of seconds; got {raw!r}") \
            from None
    if not 0 < value <= 3600:
        raise ConfigError(f"{BUSY_TIMEOUT_ENV} must be between 0 and 3600 s; got {raw!r}")
    return value


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    # Let SQLAlchemy, not pysqlite, decide when transactions begin (see _sqlite_begin_immediate).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={int(_busy_timeout_s() * 1000)}")
    cur.close()


def _sqlite_reader_pragmas(dbapi_conn, record) -> None:
    """The writer's pragmas, then ``query_only``."""
    _sqlite_pragmas(dbapi_conn, record)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA query_only=ON")
    cur.close()


def _sqlite_begin_immediate(conn) -> None:
    # Take the write lock at BEGIN, so two writers serialize instead of both reading the
    # same chain head and one failing at COMMIT.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def _sqlite_begin_deferred(conn) -> None:
    # A read's snapshot is taken at its first SELECT; no lock is held against writers.
    conn.exec_driver_sql("BEGIN")


def reset_engines() -> None:
    """Dispose and forget cached engines (tests switch databases between cases)."""
    for engine in _ENGINES.values():
        engine.dispose()
    _ENGINES.clear()
