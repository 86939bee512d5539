"""The audit page's query: events filtered by type, run, actor and date, one page at a time.

Why: the page showed the latest 500 events and nothing else; an auditor looking for one
run's approvals, or last week's refused sign-ins, scrolled. Filters are exact (event type,
run id, actor) or a day range (UTC dates, inclusive), applied in the database; pages hold
:data:`PAGE_SIZE` events, newest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from sqlalchemy import func
from sqlmodel import Session, col, select

from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import AuditEvent

PAGE_SIZE = 50


class BadFilter(ValueError):
    """A filter the page cannot apply (e.g. a date that is not YYYY-MM-DD)."""


@dataclass(frozen=True)
class AuditFilter:
    """What the auditor asked for; empty strings mean "any"."""

    action: str = ""
    run: str = ""
    actor: str = ""
    since: str = ""  # YYYY-MM-DD, inclusive
    until: str = ""  # YYYY-MM-DD, inclusive

    def query(self) -> dict[str, str]:
        """The filter as query parameters (for the links between pages)."""
        return {k: v for k, v in vars(self).items() if v}


@dataclass(frozen=True)
class AuditPage:
    events: list[AuditEvent]
    page: int
    pages: int
    total: int
    actions: list[str]  # every event type recorded, for the filter's choices


def audit_page(wanted: AuditFilter, page: int = 1) -> AuditPage:
    """The ``page``-th page (from 1) of the events ``wanted`` selects, newest first."""
    conditions = _conditions(wanted)
    with Session(get_engine()) as s:
        total = s.exec(select(func.count()).select_from(AuditEvent).where(*conditions)).one()
        pages = max(1, -(-int(total) // PAGE_SIZE))
        page = min(max(1, page), pages)
        events = list(s.exec(select(AuditEvent).where(*conditions)
                             .order_by(col(AuditEvent.seq).desc())
                             .offset((page - 1) * PAGE_SIZE).limit(PAGE_SIZE)).all())
        actions = sorted(s.exec(select(AuditEvent.action).distinct()).all())
    return AuditPage(events, page, pages, int(total), actions)


def _conditions(wanted: AuditFilter) -> list:
    conditions = []
    if wanted.action:
        conditions.append(col(AuditEvent.action) == wanted.action)
    if wanted.run:
        conditions.append(col(AuditEvent.run_id) == wanted.run)
    if wanted.actor:
        conditions.append(col(AuditEvent.actor) == wanted.actor)
    # Timestamps are ISO-8601 UTC text (``2026-11-28T20:21:14+00:00``): they sort as text.
    if wanted.since:
        conditions.append(col(AuditEvent.created_at) >= _day(wanted.since, "from").isoformat())
    if wanted.until:
        after = _day(wanted.until, "to") + timedelta(days=1)
        conditions.append(col(AuditEvent.created_at) < after.isoformat())
    return conditions


def _day(text: str, which: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise BadFilter(f"the '{which}' date must be YYYY-MM-DD") from None
