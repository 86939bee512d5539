"""Alembic's environment: migrate the connection :mod:`ehr_release.storage.migrate` hands over.

There is no ``alembic.ini`` and no URL here: the application migrates its own database, on
the connection it already holds the migration lock on (see that module), so every way in
(CLI, dashboard, flow process, tests) migrates the same way.
"""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

from ehr_release.storage import models, pending  # noqa: F401  (register the tables)

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=SQLModel.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
