"""What the index and run pages show about runs: status as it really is, and what comes next.

Why: the stored status alone misleads. A run whose flow died keeps its last status forever,
so every status shown here goes through :func:`ehr_release.service.run_state` (``stalled``
plus the command that continues it); a reviewer's own requests are marked before she opens
them (:func:`ehr_release.governance.identity.same_person`, the one four-eyes rule); and a run whose
flow
is still working refreshes itself until it settles, so the page follows it to ``published``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from ehr_release.dashboard.charts import run_charts
from ehr_release.dashboard.documents import certificate_file, datasheet_file, prefect_links
from ehr_release.dashboard.risk import risk_view
from ehr_release.dashboard.summary import plain_summary
from ehr_release.governance.identity import same_person
from ehr_release.service import SETTLED, RunState, run_state
from ehr_release.storage import chained, pending, runs
from ehr_release.storage.audit import iter_events
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import ReleaseRun
from ehr_release.storage.runs import Status
from ehr_release.storage.users import SignedIn

#: Seconds between reloads of a page whose run a flow is still working on.
REFRESH_S = 5
NEEDS_OTHER = "needs another reviewer"


@dataclass(frozen=True)
class RunRow:
    """One run in an index list."""

    run: ReleaseRun
    shown: str  # the status, or "stalled"
    next_step: str | None
    own: bool  # requested by the signed-in user: the four-eyes rule bars her decision
    expires_at: str | None  # when the approval window closes (awaiting runs only)


def index_rows(who: SignedIn, limit: int = 100) -> tuple[list[RunRow], list[RunRow]]:
    """(awaiting approval, recent runs), each with the status a person should see.

    ``run_state`` is asked only about unsettled runs: a settled status cannot be stalled.
    """
    windows = {row.run_id: row.expires_at for row in pending.pending_runs()}
    listed = runs.list_runs(limit=limit)
    requested_by = chained_requesters([run.id for run in listed])
    rows = []
    for run in listed:
        state = run_state(run.id) if run.status not in SETTLED else None
        awaiting = run.status == Status.AWAITING_APPROVAL
        rows.append(RunRow(run, state.shown if state else run.status,
                           state.next_step if state else None,
                           same_person(requested_by.get(run.id, run.requester), who.name),
                           windows.get(run.id) if awaiting else None))
    return [r for r in rows if r.run.status == Status.AWAITING_APPROVAL], rows


def run_view(run: ReleaseRun, who: SignedIn) -> dict[str, Any]:
    """Everything the run page shows (the template only lays it out)."""
    state: RunState = run_state(run.id)
    bundle = pending.get_pending(run.id)
    verification = runs.latest_verification(run.id)
    utility = runs.latest_utility(run.id)
    awaiting = run.status == Status.AWAITING_APPROVAL
    requester = chained.requester(run.id) or run.requester
    own = same_person(requester, who.name)
    return {
        "run": run, "state": state, "requester": requester,
        "refresh_s": REFRESH_S if not state.stalled and run.status not in SETTLED else None,
        "parameters": json.loads(run.parameters_json),
        "verification": verification, "utility": utility,
        "approval": runs.get_approval(run.id),
        "events": (events := list(iter_events(run.id))),
        "own": own, "can_decide": who.role == "reviewer" and awaiting and not own,
        # an approved run whose publishing failed or stopped: a reviewer may run it again
        "can_retry": who.role == "reviewer" and run.status == Status.APPROVED and state.stalled,
        "expires_at": bundle.expires_at if awaiting and bundle else None,
        "certificate": certificate_file(run.id), "datasheet": datasheet_file(run.id),
        "prefect": prefect_links(run, events),
        "summary": plain_summary(run, verification, utility, bundle),
        "charts": run_charts(bundle, utility),
        "risk": risk_view(bundle),
        "measures": utility_rows(utility),
        "destination_problem": _destination_problem(run) if awaiting else None,
    }


def _destination_problem(run: ReleaseRun) -> str | None:
    """Why approving would not publish (shown before the reviewer decides), or None."""
    from ehr_release.core.errors import EhrReleaseError
    from ehr_release.storage.destinations import destination_problem

    try:
        return destination_problem(run.out_dir)
    except EhrReleaseError as exc:  # e.g. the site's settings disagree with this process
        return str(exc)


def decision_notice(run_id: str) -> str | None:
    """After a decision: who decided what, and the status the run ended in.

    Built from the database, never from the URL, so a crafted link cannot put words on the
    page.
    """
    approval = runs.get_approval(run_id)
    if approval is None:
        return None
    state = run_state(run_id)
    text = (f"Decision recorded: {approval.decision} by {approval.reviewer}. "
            f"The run is now {state.shown}.")
    return f"{text} Next: {state.next_step}" if state.stalled and state.next_step else text


def chained_requesters(run_ids: list[str]) -> dict[str, str]:
    """Who requested each run, as the chain says (one query for a whole list): the page
    marks a reviewer's own requests by the chain, as the decision itself checks them."""
    with Session(get_engine()) as s:
        return chained.requesters(s, run_ids)


def utility_rows(utility: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """Each utility figure as the documents print it: name, value (shares as %), and what
    it means with its scale, from the measures registry (:mod:`ehr_release.documents.measures`)."""
    from ehr_release.documents.measures import explain, shown_value

    if not utility:
        return []
    algorithm = str(utility.get("algorithm", ""))
    return [(name, shown_value(algorithm, name, value), explain(algorithm, name))
            for name, value in (utility.get("metrics") or {}).items()]
