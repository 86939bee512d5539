"""Alembic migrations of the ehr-release database (see README.md in this folder)."""

#: The newest revision: a database at it needs no migration (checked without loading
#: Alembic). Update it with every new revision; ``tests/test_migrations.py`` checks it.
HEAD = "0001"
