"""Run ids from a unique prefix: ``rel-9eb5`` or ``9eb5`` for ``rel-9eb5ea12…``.

Run ids are 36 characters; people copy the first few. A prefix that names exactly one run is
that run; one that names several is refused in one line listing them (never a guess); one
that names none is passed on unchanged, so each command refuses an unknown run the way it
always did (``approve`` and ``publish`` audit the attempt).
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from ehr_release.core.errors import EhrReleaseError
from ehr_release.storage.engine import engine_or_default
from ehr_release.storage.models import ReleaseRun

PREFIX = "rel-"
SHOWN = 10


class AmbiguousRunId(EhrReleaseError):
    """A run-id prefix that more than one run starts with."""


def resolve_run_id(text: str) -> str:
    """The full run id ``text`` is a unique prefix of (with or without ``rel-``)."""
    text = text.strip()
    if not text:
        return text
    candidates = [text] if text.startswith(PREFIX) else [text, PREFIX + text]
    with Session(engine_or_default(None)) as s:
        if s.get(ReleaseRun, text) is not None:
            return text
        found: list[str] = []
        for prefix in candidates:
            starts = col(ReleaseRun.id).startswith(prefix, autoescape=True)
            found += s.exec(select(ReleaseRun.id).where(starts)
                            .order_by(col(ReleaseRun.id)).limit(SHOWN + 1)).all()
    found = sorted(set(found))
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        listed = ", ".join(found[:SHOWN]) + (", …" if len(found) > SHOWN else "")
        raise AmbiguousRunId(f"run id {text!r} is the start of {len(found)}"
                             f"{'+' if len(found) > SHOWN else ''} runs ({listed}); give more "
                             "of it")
    return text
