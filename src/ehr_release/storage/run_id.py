"""A run's id, drawn without the database layer: ``run`` draws it before SQLAlchemy loads,
to start the run's flow process on it (:mod:`ehr_release.flows.spawn`)."""

from __future__ import annotations

import secrets

#: What every run id starts with (people may leave it off: cli_support.run_ids).
PREFIX = "rel-"


def new_run_id() -> str:
    """An unguessable run id (128 bits from the OS CSPRNG), safe in paths and URLs."""
    return PREFIX + secrets.token_hex(16)
