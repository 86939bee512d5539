"""Which errors are transient — I/O and database hiccups a retry may cure.

In a module of its own so that both the retry condition (:mod:`ehr_release.tasks.retry`) and
the redaction of stored errors (:mod:`ehr_release.tasks.redaction`) read the one list without
importing each other; SQLAlchemy loads only with it.
"""

from __future__ import annotations

from sqlalchemy.exc import OperationalError

TRANSIENT = (OSError, OperationalError, TimeoutError, ConnectionError)
