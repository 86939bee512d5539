"""The ε spent on one source extract across differentially private releases.

ε composes: k releases of the same records at ε each are, together, a kε release, whatever
each ledger says about itself. A release's own ledger (``ledger.json``) cannot see the
others, so this module keeps the account per *source*: the SHA-256 fingerprint of the
ingested extract (:class:`~ehr_release.storage.models.DatasetRecord`). The database already
holds everything needed -- each run's dataset, algorithm, parameters, status and pinned
candidate -- so the account is a query, not a second copy that could drift from it.

Counted: every run of a differentially private algorithm on an extract with the same
fingerprint whose release was *drawn* (its candidate pinned for review: see
:func:`~ehr_release.storage.runs.pin_candidate`), whatever became of it. Published and
approved runs obviously; but also rejected runs, runs refused for low utility and runs still
awaiting a decision: their draws were seen by the steward and the reviewer, and publishing
the draw that looked best after a rejection or a low-utility refusal selects among several
draws, which the sum of their ε covers only when the choice looks at the draws alone (a
choice made on figures from the true data is not covered by any ε). Not counted:
runs that failed before drawing anything, and the evaluation's own DiffGen runs, which are
never shown (their accuracy is, on the internal certificate only, marked as not covered).

Counted too: every DP candidate a comparison drew from the extract
(:func:`record_comparison_draw`). A comparison never recommends nor releases a DP row, but
the steward sees its utility, measured on the true data, and may then pick ε and h for a
direct ``run``: a choice among draws of the same records, which composes like any other
(the sum counts the draws; the choice, made on true-data figures, is as above covered by no
ε -- why such rows are never recommended).
A comparison makes no run, so each draw is an audit event (``comparison.drawn``: the
comparison, the extract's fingerprint, the candidate and its ε); the chain is append-only
and tamper-evident, so this part of the account is a query too.

Limits (why this is an account of one extract, not of the patients): an extract that differs
by one record has another fingerprint, so overlapping extracts of the same patients are not
summed; the site must keep to one extract per cohort for the cap to mean what it says.

Site policy: :data:`EPSILON_TOTAL_ENV` (a positive number) is the most ε the drawn DP
releases and comparison candidates of one extract may spend together; a run's draw, a
comparison's draws (all its DP candidates together, before the first), an approval or a
publish that would go beyond it is refused. Unset, nothing is refused, and the reviewer
still sees the account.

Reservations (why the check before a draw is one step with recording it): two requests on
one extract started at the same moment could otherwise both pass the check and both draw,
beyond the total, and a draw once seen cannot be taken back. So the check takes the audit
chain's lock (:func:`~ehr_release.storage.audit.lock_chain`: the PostgreSQL advisory lock,
SQLite's ``BEGIN IMMEDIATE``), reads the account and, if the draw fits, appends an
``epsilon.reserved`` event (the run or comparison, the fingerprint, ε; no data) in the same
transaction: the second request waits, then sees the first one's reservation. The account
counts reservations: a run once, reserved or drawn or both (the run is the unit); a
comparison for the larger of what it reserved and what it drew (its reservation covers all
its DP candidates, so a ``comparison.drawn`` event is never added on top of it). A run that
failed before its release was drawn gives its reservation back (``epsilon.released``,
:func:`release_undrawn`): nothing of it was seen, as before reservations existed. A run
that stops without failing (a crash, awaiting ``resume``) keeps its reservation, and so does
a comparison whose candidates did not all draw: counting what may have been drawn is the
safe side, and a comparison's rows are all or nothing anyway.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sqlalchemy import and_, or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from ehr_release.errors import ConfigError, EhrReleaseError
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import append_event, lock_chain, record_event
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.models import ArtifactRecord, AuditEvent, DatasetRecord, ReleaseRun

#: Site policy: the total ε one source extract may spend over all its DP releases.
EPSILON_TOTAL_ENV = "EHR_RELEASE_EPSILON_TOTAL"
#: The artifact kind of a drawn release (:func:`~ehr_release.storage.runs.pin_candidate`).
DRAWN = "candidate"
#: The actor of a comparison's ``comparison.drawn`` events (the candidate task draws).
COMPARISON_ACTOR = "system:compare_flow"
#: The actor of ``epsilon.reserved`` and ``epsilon.released`` events.
ACCOUNT_ACTOR = "system:epsilon_account"


@dataclass(frozen=True)
class EpsilonAccount:
    """ε of one run, or one comparison, against what was already spent on the same extract.

    ``earlier`` is the sum over ``releases`` other DP runs whose release was drawn or whose
    ε is reserved, of which ``published`` were published; ``compared`` the sum over
    ``compared_draws`` DP candidates drawn or reserved in ``comparisons`` comparisons;
    ``this_run`` what ``subject`` adds (a run's ε, or a comparison's DP candidates'
    together); ``total`` the site's cap, None when unset.
    """

    fingerprint: str
    earlier: Fraction
    releases: int
    published: Fraction
    this_run: Fraction
    total: Fraction | None
    compared: Fraction = Fraction(0)
    compared_draws: int = 0
    comparisons: int = 0
    subject: str = "this release"

    @property
    def after(self) -> Fraction:
        return self.earlier + self.compared + self.this_run

    @property
    def exceeded(self) -> bool:
        return self.total is not None and self.after > self.total

    def text(self) -> str:
        """The account in one sentence for the reviewer (no data: ε and counts)."""
        cap = (f"no site total is set ({EPSILON_TOTAL_ENV})" if self.total is None
               else f"site total ε = {_show(self.total)}, {EPSILON_TOTAL_ENV}"
               + (" — EXCEEDED" if self.exceeded else ""))
        return (f"ε drawn (or reserved) from this extract by {self.releases} other "
                f"differentially private run{_s(self.releases)}: {_show(self.earlier)} (published: "
                f"{_show(self.published)}); by {self.compared_draws} DP candidate"
                f"{_s(self.compared_draws)} of {self.comparisons} comparison"
                f"{_s(self.comparisons)}: {_show(self.compared)}; with {self.subject}: "
                f"{_show(self.after)} ({cap}). Draws from the same records compose, and so "
                "does choosing among them: their ε add up.")


class EpsilonBudgetExhausted(EhrReleaseError):
    """Drawing this DP release would take its extract beyond the site's total ε."""


def refuse_beyond_total(run_id: str, dp_algorithms: Collection[str],
                        engine: Engine | None = None) -> EpsilonAccount | None:
    """The run's account; raises before a draw the extract's ε cannot pay for, else
    reserves the run's ε (once: a resumed run keeps its reservation).

    Called before the anonymizer runs: a draw beyond the total would itself count (the
    steward sees it), so it is never made. Check and reservation are one transaction under
    the chain lock (see the module's docstring).

    Raises
    ------
    EpsilonBudgetExhausted
        The site set a total and this run's ε would take the extract beyond it.
    """
    with Session(_engine(engine)) as s:
        lock_chain(s)
        spent = _run_account(s, run_id, dp_algorithms)
        if spent is None:
            return None
        if spent.exceeded:
            raise EpsilonBudgetExhausted("this release would exceed the ε budget of its "
                                         "extract: " + spent.text())
        if not _holds_reservation(s, run_id):
            append_event(s, actor=ACCOUNT_ACTOR, action=AuditAction.EPSILON_RESERVED,
                         run_id=run_id, payload={"run": run_id, "dataset": spent.fingerprint,
                                                 "epsilon": str(spent.this_run)})
            s.commit()
    return spent


def release_undrawn(run_id: str, engine: Engine | None = None) -> bool:
    """Give back a failed run's reservation if its release was never drawn (pinned).

    True if an ``epsilon.released`` event was written. A run that is not failed, holds no
    reservation, or whose release was pinned keeps counting.
    """
    with Session(_engine(engine)) as s:
        lock_chain(s)
        run = s.get(ReleaseRun, run_id)
        drawn = s.exec(select(ArtifactRecord.id).where(ArtifactRecord.run_id == run_id,
                                                       ArtifactRecord.kind == DRAWN)).first()
        if run is None or run.status != "failed" or drawn is not None \
                or not _holds_reservation(s, run_id):
            return False
        append_event(s, actor=ACCOUNT_ACTOR, action=AuditAction.EPSILON_RELEASED,
                     run_id=run_id, payload={"run": run_id})
        s.commit()
        return True


def refuse_comparison_beyond_total(comparison_id: str, fingerprint: str,
                                   candidates: Sequence[Mapping[str, Any]],
                                   dp_algorithms: Collection[str],
                                   engine: Engine | None = None) -> EpsilonAccount | None:
    """The account a comparison's DP candidates (their parameters) would leave; raises
    before the first draw when they would take the extract beyond the total together, else
    reserves their ε together (one transaction under the chain lock, as for a run).

    All or nothing: a comparison missing some of its rows would mislead more than it tells,
    and every row it did draw would count all the same. None when no candidate is DP.

    Raises
    ------
    EpsilonBudgetExhausted
        The site set a total and these candidates' ε would take the extract beyond it.
    """
    if not candidates:
        return None
    epsilons = [params_epsilon(p) for p in candidates]
    with Session(_engine(engine)) as s:
        lock_chain(s)
        spent = _comparison_account(s, fingerprint, epsilons, dp_algorithms)
        if spent.exceeded:
            raise EpsilonBudgetExhausted(
                "this comparison would exceed the ε budget of its extract: " + spent.text()
                + " Nothing was drawn: lower their epsilon, or compare without them.")
        append_event(s, actor=ACCOUNT_ACTOR, action=AuditAction.EPSILON_RESERVED,
                     payload={"comparison": comparison_id, "dataset": fingerprint,
                              "candidates": len(epsilons), "epsilon": str(spent.this_run)})
        s.commit()
    return spent


def record_comparison_draw(comparison_id: str, fingerprint: str, candidate: int,
                           algorithm: str, params: Mapping[str, Any],
                           engine: Engine | None = None) -> None:
    """Count one DP candidate a comparison drew from the extract ``fingerprint``.

    Called as soon as the draw exists, before anything about it is shown (the progress
    display, the report), so a comparison that stops half-way has counted what it drew.
    An audit event (``comparison.drawn``): no run holds a comparison, the chain is append-only
    and tamper-evident, and its payload is parameters and counts only.
    """
    record_event(actor=COMPARISON_ACTOR, action=AuditAction.COMPARISON_DRAWN,
                 payload={"comparison": comparison_id, "dataset": fingerprint,
                          "candidate": candidate, "algorithm": algorithm,
                          "epsilon": str(params_epsilon(params))}, engine=engine)


def _show(x: Fraction) -> str:
    return f"{float(x):.6g}"


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def epsilon_total() -> Fraction | None:
    """The site's cap (:data:`EPSILON_TOTAL_ENV`), None when unset.

    Raises
    ------
    ConfigError
        The variable is set but not a positive finite number.
    """
    raw = os.environ.get(EPSILON_TOTAL_ENV, "").strip()
    if not raw:
        return None
    try:
        value = Fraction(raw)
    except (ValueError, ZeroDivisionError):
        value = Fraction(-1)
    if value <= 0:
        raise ConfigError(f"{EPSILON_TOTAL_ENV} must be a positive number (the total ε one "
                          f"extract may spend), got {raw!r}")
    return value


def params_epsilon(params: Mapping[str, Any]) -> Fraction:
    """The ε a request's parameters give it (0 if they have none)."""
    value = params.get("epsilon")
    return Fraction(0) if value is None else Fraction(str(value))


def run_epsilon(run: ReleaseRun) -> Fraction:
    """The ε a run's parameters give it (0 if it has none)."""
    return params_epsilon(json.loads(run.parameters_json))


def account(run_id: str, dp_algorithms: Collection[str],
            engine: Engine | None = None) -> EpsilonAccount | None:
    """The extract's ε account as seen by ``run_id``; None if its algorithm is not DP."""
    with Session(_engine(engine)) as s:
        return _run_account(s, run_id, dp_algorithms)


def _run_account(s: Session, run_id: str,
                 dp_algorithms: Collection[str]) -> EpsilonAccount | None:
    run = s.get(ReleaseRun, run_id)
    if run is None or run.algorithm not in dp_algorithms:
        return None
    fingerprint = s.get(DatasetRecord, run.dataset_id).fingerprint
    return _account(s, fingerprint, dp_algorithms, run_epsilon(run), "this release",
                    exclude=run_id)


def comparison_account(fingerprint: str, epsilons: Sequence[Fraction],
                       dp_algorithms: Collection[str],
                       engine: Engine | None = None) -> EpsilonAccount:
    """The extract's ε account as seen by a comparison whose DP candidates have ``epsilons``."""
    with Session(_engine(engine)) as s:
        return _comparison_account(s, fingerprint, epsilons, dp_algorithms)


def _comparison_account(s: Session, fingerprint: str, epsilons: Sequence[Fraction],
                        dp_algorithms: Collection[str]) -> EpsilonAccount:
    this = sum(epsilons, Fraction(0))
    subject = (f"this comparison's {len(epsilons)} DP candidate{_s(len(epsilons))} "
               f"(ε = {_show(this)})")
    return _account(s, fingerprint, dp_algorithms, this, subject, exclude=None)


def _account(s: Session, fingerprint: str, dp_algorithms: Collection[str], this: Fraction,
             subject: str, exclude: str | None) -> EpsilonAccount:
    drawn = select(ArtifactRecord.run_id).where(ArtifactRecord.kind == DRAWN)
    held = and_(col(ReleaseRun.id).in_(_run_events(AuditAction.EPSILON_RESERVED)),
                col(ReleaseRun.id).not_in(_run_events(AuditAction.EPSILON_RELEASED)))
    query = (select(ReleaseRun)  # each run once, however many of these hold for it
             .join(DatasetRecord, ReleaseRun.dataset_id == DatasetRecord.id)
             .where(DatasetRecord.fingerprint == fingerprint,
                    col(ReleaseRun.algorithm).in_(list(dp_algorithms)),
                    or_(col(ReleaseRun.id).in_(drawn), held)))
    if exclude is not None:
        query = query.where(ReleaseRun.id != exclude)
    others = s.exec(query).all()
    earlier = sum((run_epsilon(r) for r in others), Fraction(0))
    published = sum((run_epsilon(r) for r in others if r.status == "published"), Fraction(0))
    spends = _comparison_spends(s, fingerprint).values()
    return EpsilonAccount(fingerprint, earlier, len(others), published, this, epsilon_total(),
                          compared=sum((e for _, e in spends), Fraction(0)),
                          compared_draws=sum(n for n, _ in spends), comparisons=len(spends),
                          subject=subject)


def _run_events(action: AuditAction) -> SelectOfScalar[str | None]:
    """The ids of the runs that have an ``action`` event."""
    return select(AuditEvent.run_id).where(AuditEvent.action == action.value,
                                           col(AuditEvent.run_id).is_not(None))


def _holds_reservation(s: Session, run_id: str) -> bool:
    """True if ``run_id`` reserved its ε and did not give it back."""
    actions = set(s.exec(select(AuditEvent.action).where(
        AuditEvent.run_id == run_id,
        col(AuditEvent.action).in_([AuditAction.EPSILON_RESERVED.value,
                                    AuditAction.EPSILON_RELEASED.value]))).all())
    return actions == {AuditAction.EPSILON_RESERVED.value}


def _comparison_spends(s: Session, fingerprint: str) -> dict[str, tuple[int, Fraction]]:
    """(DP candidates, ε) each comparison spent on the extract: the larger of what it
    reserved and what it drew (``comparison.drawn``), never their sum -- the reservation
    covers the draws; a comparison from before reservations has only its draws.

    The LIKE only narrows the scan (a fingerprint is hex: no wildcard); the payload's own
    fields decide (a run's reservation names a run, not a comparison).
    """
    rows = s.exec(select(AuditEvent.action, AuditEvent.payload_json).where(
        col(AuditEvent.action).in_([AuditAction.COMPARISON_DRAWN.value,
                                    AuditAction.EPSILON_RESERVED.value]),
        col(AuditEvent.payload_json).contains(fingerprint))).all()
    books: dict[str, dict[str, tuple[int, Fraction]]] = {"drawn": {}, "reserved": {}}
    for action, raw in rows:
        payload = json.loads(raw)
        if payload.get("dataset") != fingerprint or "comparison" not in payload:
            continue
        book = books["drawn" if action == AuditAction.COMPARISON_DRAWN else "reserved"]
        n, e = book.get(str(payload["comparison"]), (0, Fraction(0)))
        book[str(payload["comparison"])] = (n + int(payload.get("candidates", 1)),
                                            e + Fraction(str(payload["epsilon"])))
    zero = (0, Fraction(0))
    return {c: (max(books["drawn"].get(c, zero)[0], books["reserved"].get(c, zero)[0]),
                max(books["drawn"].get(c, zero)[1], books["reserved"].get(c, zero)[1]))
            for c in books["drawn"].keys() | books["reserved"].keys()}


def dp_algorithm_names() -> frozenset[str]:
    """Registered algorithms whose guarantee is ε-DP (their runs spend the extract's ε)."""
    from ehr_release import registry

    return frozenset(n for n in registry.names() if registry.get(n).differentially_private)
