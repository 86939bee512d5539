"""A release run's status and the moves it may make: rules only, no database.

Kept apart from :mod:`ehr_release.storage.runs` (which applies them to rows through
SQLModel) so that ``status`` and ``list`` can apply the very same rules to rows read with
the standard library (:mod:`ehr_release.storage.sqlite_read`) without loading SQLAlchemy.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from ehr_release.core.errors import NotFound


class Status(StrEnum):
    REQUESTED = "requested"
    ANONYMIZED = "anonymized"
    VERIFIED = "verified"
    EVALUATED = "evaluated"
    CERTIFIED = "certified"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    REJECTED = "rejected"
    PUBLISHED = "published"
    FAILED = "failed"


#: The only moves a run may make. Anything not listed raises IllegalTransition: in particular
#: nothing reaches ``published`` except from ``approved``, and nothing reaches ``approved``
#: except from ``awaiting_approval`` — which only a verified, certified run can reach.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.REQUESTED: frozenset({Status.ANONYMIZED, Status.FAILED}),
    Status.ANONYMIZED: frozenset({Status.VERIFIED, Status.FAILED}),
    Status.VERIFIED: frozenset({Status.EVALUATED, Status.FAILED}),
    Status.EVALUATED: frozenset({Status.CERTIFIED, Status.FAILED}),
    Status.CERTIFIED: frozenset({Status.AWAITING_APPROVAL, Status.FAILED}),
    Status.AWAITING_APPROVAL: frozenset({Status.APPROVED, Status.REJECTED, Status.FAILED}),
    Status.APPROVED: frozenset({Status.PUBLISHED, Status.FAILED}),
    Status.REJECTED: frozenset(),
    Status.PUBLISHED: frozenset(),
    Status.FAILED: frozenset(),
}
TERMINAL = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
#: The happy path in order; a resumed flow skips moves to a status the run already passed.
PROGRESSION = (Status.REQUESTED, Status.ANONYMIZED, Status.VERIFIED, Status.EVALUATED,
               Status.CERTIFIED, Status.AWAITING_APPROVAL, Status.APPROVED, Status.PUBLISHED)


class RunRow(Protocol):
    """What the rules read of a ``release_runs`` row (an ORM object or a plain one)."""

    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...


def reached(current: Status, target: Status) -> bool:
    """True if ``current`` is ``target`` or lies after it on the happy path."""
    if current not in PROGRESSION or target not in PROGRESSION:
        return current == target
    return PROGRESSION.index(current) >= PROGRESSION.index(target)


def publication_failed(run: RunRow) -> bool:
    """An approved run whose last publishing attempt failed (it can be retried)."""
    return run.status == Status.APPROVED and bool(run.error)


def unknown_run(run_id: str) -> NotFound:
    """The refusal of a run id no run has (the same words whichever path read the table)."""
    return NotFound(f"no release run with id {run_id!r}")
