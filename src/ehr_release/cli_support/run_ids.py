"""Run ids from a unique prefix: ``rel-9eb5`` or ``9eb5`` for ``rel-9eb5ea12…``.

Run ids are 36 characters; people copy the first few. A prefix that names exactly one run is
that run; one that names several is refused in one line listing them (never a guess); one
that names none is passed on unchanged, so each command refuses an unknown run the way it
always did (``approve`` and ``publish`` audit the attempt).

The ids are read with the standard library when that is safe
(:mod:`ehr_release.cli_support.quick_read`: every command taking a run id resolves it while
its arguments are parsed), else through SQLModel; both give :func:`resolve_in` the same ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ehr_release.core.errors import EhrReleaseError
from ehr_release.storage.run_id import PREFIX

if TYPE_CHECKING:  # loaded only when the full path reads the ids
    from sqlmodel import Session

SHOWN = 10


class AmbiguousRunId(EhrReleaseError):
    """A run-id prefix that more than one run starts with."""


class RunIds(Protocol):
    """The two reads resolving a prefix needs."""

    def run(self, run_id: str) -> object | None: ...
    def run_ids_starting(self, prefix: str, limit: int) -> list[str]: ...


def resolve_run_id(text: str) -> str:
    """The full run id ``text`` is a unique prefix of (with or without ``rel-``)."""
    from ehr_release.cli_support.quick_read import answered

    text = text.strip()
    if not text:
        return text
    quick = answered(lambda rows: resolve_in(text, rows), refusals=(AmbiguousRunId,))
    if quick is not None:
        return quick
    from sqlmodel import Session

    from ehr_release.storage.engine import engine_or_default

    with Session(engine_or_default(None)) as s:
        return resolve_in(text, _OrmRunIds(s))


def resolve_in(text: str, ids: RunIds) -> str:
    """The rule, whichever path reads the ids (``text`` stripped and not empty)."""
    if ids.run(text) is not None:
        return text
    candidates = [text] if text.startswith(PREFIX) else [text, PREFIX + text]
    found = sorted({i for prefix in candidates
                    for i in ids.run_ids_starting(prefix, SHOWN + 1)})
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        listed = ", ".join(found[:SHOWN]) + (", …" if len(found) > SHOWN else "")
        raise AmbiguousRunId(f"run id {text!r} is the start of {len(found)}"
                             f"{'+' if len(found) > SHOWN else ''} runs ({listed}); give more "
                             "of it")
    return text


class _OrmRunIds:
    """:class:`RunIds` through SQLModel (any database URL)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def run(self, run_id: str) -> object | None:
        from ehr_release.storage.models import ReleaseRun

        return self._s.get(ReleaseRun, run_id)

    def run_ids_starting(self, prefix: str, limit: int) -> list[str]:
        from sqlmodel import col, select

        from ehr_release.storage.models import ReleaseRun

        starts = col(ReleaseRun.id).startswith(prefix, autoescape=True)
        return list(self._s.exec(select(ReleaseRun.id).where(starts)
                                 .order_by(col(ReleaseRun.id)).limit(limit)).all())
