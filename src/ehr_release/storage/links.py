"""Keep and read each extract's keyed patient hashes (:class:`~.models.ExtractLinks`).

One row per run or comparison, written when its flow has read the extract and before anything
is drawn from it, so an account or a history check that starts later always sees it.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.models import ExtractLinks
from ehr_release.storage.patient_links import PatientLinks

RUN = "run"
COMPARISON = "comparison"


def save_links(subject: str, kind: str, source: str, links: PatientLinks,
               engine: Engine | None = None) -> None:
    """Record ``subject``'s patient hashes once (a resumed run keeps its first row)."""
    ids, contents = links.to_bytes()
    with Session(_engine(engine)) as s:
        if s.get(ExtractLinks, subject) is not None:
            return
        s.add(ExtractLinks(subject=subject, kind=kind, source=source, patients=links.patients,
                           id_hashes=ids, content_hashes=contents))
        s.commit()


def load_links(s: Session, subjects: Iterable[str]) -> dict[str, PatientLinks]:
    """The stored hashes of those ``subjects`` that have any (older runs may not)."""
    wanted = list(dict.fromkeys(subjects))
    if not wanted:
        return {}
    rows = s.exec(select(ExtractLinks).where(col(ExtractLinks.subject).in_(wanted))).all()
    return {r.subject: PatientLinks.from_bytes(r.id_hashes, r.content_hashes) for r in rows}


def source_of(subject: str, engine: Engine | None = None) -> str | None:
    with Session(_engine(engine)) as s:
        row = s.get(ExtractLinks, subject)
        return None if row is None else row.source


def linked_subjects(s: Session, kind: str | None = None) -> list[ExtractLinks]:
    """Every stored row (of ``kind``), oldest first: the candidates a history check reads."""
    query = select(ExtractLinks).order_by(col(ExtractLinks.created_at))
    if kind is not None:
        query = query.where(ExtractLinks.kind == kind)
    return list(s.exec(query).all())
