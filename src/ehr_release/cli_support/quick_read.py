"""``status``, ``list`` and run-id prefixes answered without SQLAlchemy, when that is safe.

Why: these commands are asked often, and a person waits for them (issue 37 goal 3: ≤ 0.3 s).
Each answer here reads rows with the standard library (:mod:`ehr_release.storage.sqlite_read`)
and judges them with the same rules as the full path (``service.run_summary``,
``service.run_state``), so it is the same answer, word for word.

None means "ask the full path": another database than a plain SQLite file, a schema not at
head, an approval window that closed (only the full path writes its rejection and audit
event), or anything unexpected. A wrong answer is never the price of a quick one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ehr_release.core.errors import NotFound
from ehr_release.storage.deadlines import expires_now, lease_is_live
from ehr_release.storage.run_status import unknown_run
from ehr_release.storage.run_view import RunState, shown_requester, state_of, summary_of
from ehr_release.storage.sqlite_read import Rows, open_rows

T = TypeVar("T")


def answered(question: Callable[[Rows], T],
             refusals: tuple[type[Exception], ...] = (NotFound,)) -> T | None:
    """``question``'s answer from the read-only rows, or None when the full path must answer.

    ``refusals`` are the errors ``question`` raises as its answer (an unknown run); any
    other error leaves the question to the full path, which answers — or fails — in its own
    words.
    """
    try:
        with open_rows() as rows:
            return None if rows is None else question(rows)
    except refusals:
        raise
    except Exception:  # noqa: BLE001 - see the docstring: the full path decides
        return None


def run_summary(run_id: str) -> dict[str, Any] | None:
    """``service.run_summary(run_id)``, or None (its window is overdue: the full path
    rejects the run first)."""
    def question(rows: Rows) -> dict[str, Any] | None:
        run = rows.run(run_id)
        if run is None:
            raise unknown_run(run_id)
        window = rows.window(run_id)
        if window is not None and expires_now(window, run.status):
            return None
        return summary_of(run, _state(rows, run),
                          requester=_chain_requesters(rows, [run_id]).get(run_id),
                          verification=rows.latest_verification(run_id),
                          approval=rows.approval(run_id))

    return answered(question)


def run_list(limit: int) -> list[tuple[Any, str, str]] | None:
    """The newest ``limit`` runs with the status each is shown with and who requested it
    (the chain's word, as ``status`` says it), or None (a window is overdue somewhere: the
    full path rejects those runs first)."""
    def question(rows: Rows) -> list[tuple[Any, str, str]] | None:
        if any(expires_now(w, w.status) for w in rows.windows()):
            return None
        listed = rows.runs(limit)
        chain = _chain_requesters(rows, [r.id for r in listed])
        return [(run, _state(rows, run).shown, shown_requester(run, chain.get(run.id)))
                for run in listed]

    return answered(question)


def _chain_requesters(rows: Rows, run_ids: list[str]) -> dict[str, str]:
    """run id → who requested it by the chain's authentic event (``chained.requesters``
    over these rows)."""
    from ehr_release.storage.chain_auth import (
        EventAuthenticator,
        audit_keyring,
        first_authentic_actors,
    )

    check = EventAuthenticator(audit_keyring(), rows.first_keyed())
    return first_authentic_actors(rows.requested_events(run_ids), check)


def _state(rows: Rows, run: Any) -> RunState:
    def window_closes() -> str | None:
        window = rows.window(run.id)
        return window.expires_at if window else None

    return state_of(run, window_closes=window_closes,
                    lease_alive=lambda: lease_is_live(rows.lease(run.id)))
