"""Where a run stands for a person — ``stalled``, ``publication failed``, the next step —
and its summary, computed from rows already read.

Why pure functions of rows: ``service.run_summary`` reads the rows through SQLModel, while
``status`` and ``list`` read them with the standard library when they can
(:mod:`ehr_release.cli_support.quick_read`); both hand them here, so a person sees the same
words whichever path answered. Only what is fetched differs, never how it is judged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ehr_release.storage.run_status import TERMINAL, Status, publication_failed

PUBLICATION_FAILED = "publication failed"


class RunRow(Protocol):
    """What is shown of a ``release_runs`` row (an ORM object or a plain one)."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def algorithm(self) -> str: ...
    @property
    def parameters_json(self) -> str: ...
    @property
    def requester(self) -> str: ...
    @property
    def created_at(self) -> str: ...
    @property
    def updated_at(self) -> str: ...
    @property
    def error(self) -> str | None: ...


class DecisionRow(Protocol):
    """What is shown of an ``approvals`` row."""

    @property
    def reviewer(self) -> str: ...
    @property
    def decision(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def decided_at(self) -> str: ...


@dataclass(frozen=True)
class RunState:
    """Where a run stands for a person: its status, or ``stalled`` / ``publication failed``
    and how to go on."""

    status: str
    stalled: bool
    next_step: str | None
    publication_failed: bool = False

    @property
    def shown(self) -> str:
        if self.publication_failed:
            return PUBLICATION_FAILED
        return "stalled" if self.stalled else self.status


def state_of(run: RunRow, *, window_closes: Callable[[], str | None],
             lease_alive: Callable[[], bool]) -> RunState:
    """The run's status, ``stalled`` when no live flow works on an unsettled run.

    ``awaiting_approval`` needs no process (the bundle is persisted); every other unsettled
    status is only true while the flow's lease is renewed. ``window_closes`` (when the
    approval window closes, None without one) and ``lease_alive`` read the database only
    when asked: most runs need neither.
    """
    status = Status(run.status)
    if status == Status.AWAITING_APPROVAL:
        closes = window_closes()
        until = f" before {closes}" if closes else ""
        return RunState(status, False, f"a reviewer decides{until}: ehr-release approve "
                                       f"{run.id} --reviewer NAME --decision approve|reject "
                                       "--reason TEXT")
    if status in TERMINAL or lease_alive():
        return RunState(status, False, None)
    if publication_failed(run):
        return RunState(status, True, f"publishing failed ({run.error}); once the cause is "
                                      f"fixed: ehr-release publish {run.id}",
                        publication_failed=True)
    command = (f"ehr-release publish {run.id}" if status == Status.APPROVED
               else f"ehr-release resume {run.id}")
    return RunState(status, True, f"its flow is not running; continue with: {command}")


def shown_requester(run: RunRow, chain_requester: str | None) -> str:
    """Who requested ``run`` as a person is told: the actor of its authentic
    ``run.requested`` event, the column only when no such event exists."""
    return chain_requester or run.requester


def summary_of(run: RunRow, state: RunState, *, requester: str | None,
               verification: dict[str, Any] | None,
               approval: DecisionRow | None) -> dict[str, Any]:
    """One run as ``status`` shows it; ``requester`` is the chain's (:func:`shown_requester`)."""
    return {"run_id": run.id, "status": state.shown,
            "recorded_status": run.status if state.stalled else None,
            "next_step": state.next_step, "algorithm": run.algorithm,
            "parameters": json.loads(run.parameters_json),
            "requester": shown_requester(run, requester),
            "created_at": run.created_at, "updated_at": run.updated_at, "error": run.error,
            "verified": None if verification is None else verification["holds"],
            "decision": None if approval is None else {
                "reviewer": approval.reviewer, "decision": approval.decision,
                "reason": approval.reason, "decided_at": approval.decided_at}}
