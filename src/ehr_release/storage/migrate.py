"""Bring a database's schema to this version's: Alembic ``upgrade head``, one process at a time.

Every process that opens the database migrates it first (:func:`ehr_release.storage.engine.
get_engine`), so a fresh database is created and an old one upgraded by whichever command
comes first. Several commands may come first together — eight runs started at once on a
fresh PostgreSQL database raced ``create_all`` and seven died on "relation already exists"
(issue 33) — so the migration runs under a lock that spans processes: a PostgreSQL
session-level advisory lock, or an exclusive ``flock`` on a file beside the SQLite
database. Whoever waited finds the schema at head and has nothing to do.

A database made before migrations existed (by ``create_all``) has the tables but no
``alembic_version``: the initial revision creates only the tables it lacks, so it is
adopted and stamped, not recreated (see ``migrations/versions/0001_initial.py``).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from ehr_release.storage.migrations import HEAD

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
#: The advisory lock key of migrations ("EHRM"); the audit chain's is "EHRA".
_ADVISORY_LOCK_KEY = 0x4548524D


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for the packaged migrations, migrating ``connection``."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def migrate(engine: Engine) -> None:
    """Upgrade ``engine``'s database to the newest revision, under the migration lock.

    A database already at :data:`HEAD` costs one query: Alembic (0.4 s to import) is loaded
    only when there is something to do.
    """
    if current_revision(engine) == HEAD:
        return
    from alembic import command

    with _migration_lock(engine) as connection:
        command.upgrade(alembic_config(connection), "head")
        connection.commit()


def current_revision(engine: Engine) -> str | None:
    """The revision ``engine``'s database is at (None: not under migrations yet)."""
    with engine.connect() as connection:
        try:
            return connection.execute(text("SELECT version_num FROM alembic_version")
                                      ).scalar_one_or_none()
        except DBAPIError:  # no such table: a fresh database, or one made by create_all
            connection.rollback()
            return None


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[Connection]:
    """A connection on which no other process migrates the same database meanwhile."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _ADVISORY_LOCK_KEY})
            connection.commit()
            try:
                yield connection
            finally:
                connection.rollback()
                connection.execute(text("SELECT pg_advisory_unlock(:k)"),
                                   {"k": _ADVISORY_LOCK_KEY})
                connection.commit()
        return
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    with _file_lock(database), engine.connect() as connection:
        yield connection


@contextmanager
def _file_lock(database: str | None) -> Iterator[None]:
    """An exclusive ``flock`` on ``<database>.migrate.lock`` (none for an in-memory database).

    The kernel drops the lock when its holder dies, so a killed migration never leaves the
    next process waiting for ever.
    """
    if not database or database == ":memory:":
        yield
        return
    path = Path(f"{database}.migrate.lock")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
