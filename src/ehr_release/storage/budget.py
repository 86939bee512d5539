"""The ε each patient carries across every differentially private release that held them.

ε composes per person: k releases holding the same patient at ε each are, for that patient,
a kε release, whatever each ledger says about itself, whatever the extracts' ids, columns or
file names. A release's own ledger (``ledger.json``) cannot see the others, so this module
keeps the account per *patient*: every extract's patients are kept as keyed hashes
(:mod:`ehr_release.history.linkage`, :mod:`ehr_release.storage.links`), and a patient of a
new extract carries the sum of the ε of every earlier DP subject (run or comparison) whose
extract is linked to them. The database already holds everything else -- each run's
algorithm, parameters, status and pinned candidate -- so the account is a query, not a second
copy that could drift from it.

Counted: every run of a differentially private algorithm whose release was *drawn* (its
candidate pinned for review: see :func:`~ehr_release.storage.runs.pin_candidate`), whatever
became of it. Published and approved runs obviously; but also rejected runs, runs refused for
low utility and runs still awaiting a decision: their draws were seen by the steward and the
reviewer, and publishing the draw that looked best after a rejection or a low-utility refusal
selects among several draws, which the sum of their ε covers only when the choice looks at
the draws alone (a choice made on figures from the true data is not covered by any ε). Not
counted: runs that failed before drawing anything, and the evaluation's own DiffGen runs,
which are never shown (their accuracy is, on the internal certificate only, marked as not
covered).

Counted too: every DP candidate a comparison drew (:func:`record_comparison_draw`). A
comparison never recommends nor releases a DP row, but the steward sees its utility,
measured on the true data, and may then pick ε and h for a direct ``run``: a choice among
draws of the same records, which composes like any other. A comparison makes no run, so each
draw is an audit event (``comparison.drawn``: the comparison, the extract's fingerprint, the
candidate and its ε) and its extract's hashes are kept under the comparison's id.

Older subjects kept without hashes are linked the old way, by the whole extract's
fingerprint (all of its patients or none).

Site policy: a per-patient total always exists (default 3, see
:mod:`~ehr_release.storage.site_policy`; changing it is an audited admin action). A run's
draw, a comparison's draws (all its DP candidates together, before the first), an approval or
a publish that would take any patient beyond it is refused.

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
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sqlalchemy import and_, or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from ehr_release.core.errors import EhrReleaseError
from ehr_release.storage import site_policy
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import append_event, lock_chain, record_event
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.links import COMPARISON, load_links, save_links
from ehr_release.storage.models import ArtifactRecord, AuditEvent, DatasetRecord, ReleaseRun
from ehr_release.storage.patient_links import DEFAULT_SOURCE, LinkIndex, PatientLinks

#: The artifact kind of a drawn release (:func:`~ehr_release.storage.runs.pin_candidate`).
DRAWN = "candidate"
#: The actor of a comparison's ``comparison.drawn`` events (the candidate task draws).
COMPARISON_ACTOR = "system:compare_flow"
#: The actor of ``epsilon.reserved`` and ``epsilon.released`` events.
ACCOUNT_ACTOR = "system:epsilon_account"


@dataclass(frozen=True)
class EpsilonAccount:
    """ε of one run, or one comparison, against what its patients already carry.

    ε composes per person: a patient in three ε = 1 releases is covered by ε = 3 whatever
    each datasheet says. ``earlier`` is the most ε any patient of this extract already
    carries from other DP runs (``releases`` of them hold some of these patients; of that,
    ``published`` from published runs) and from DP candidates of comparisons
    (``compared_draws`` candidates of ``comparisons`` comparisons; ``compared`` their most on
    one patient). ``this_run`` is what ``subject`` adds; ``total`` the site's cap
    (:mod:`~ehr_release.storage.site_policy`). ``distribution`` counts patients by the ε they
    would carry afterwards (value as text, patients), most first.
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
    patients: int = 0
    distribution: tuple[tuple[str, int], ...] = ()

    @property
    def after(self) -> Fraction:
        return self.earlier + self.this_run

    @property
    def exceeded(self) -> bool:
        return self.total is not None and self.after > self.total

    def text(self) -> str:
        """The account in one sentence for the reviewer (no data: ε and counts)."""
        cap = ("no site total is set" if self.total is None
               else f"site total ε = {show_epsilon(self.total)} per patient"
               + (" — EXCEEDED" if self.exceeded else ""))
        return (f"The most ε any patient of this extract already carries: "
                f"{show_epsilon(self.earlier)}, from {self.releases} other differentially private "
                f"run{_s(self.releases)} holding some of them (published: "
                f"{show_epsilon(self.published)}) and {self.compared_draws} DP candidate"
                f"{_s(self.compared_draws)} of {self.comparisons} comparison"
                f"{_s(self.comparisons)} ({show_epsilon(self.compared)}); cumulative ε on "
                f"these patients with {self.subject}: {show_epsilon(self.after)} ({cap}). "
                "Releases of the same patients compose, whatever their ids or files, and so "
                "does choosing among draws: their ε add up.")


class EpsilonBudgetExhausted(EhrReleaseError):
    """Drawing this DP release would take some patient beyond the site's total ε."""


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
        This run's ε would take some patient of its extract beyond the site's total.
    """
    with Session(_engine(engine)) as s:
        lock_chain(s)
        spent = _run_account(s, run_id, dp_algorithms)
        if spent is None:
            return None
        if spent.exceeded:
            raise EpsilonBudgetExhausted("this release would exceed the ε budget of its "
                                         "patients: " + spent.text())
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
                                   engine: Engine | None = None,
                                   links: PatientLinks | None = None,
                                   source: str = DEFAULT_SOURCE) -> EpsilonAccount | None:
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
    if links is not None:
        save_links(comparison_id, COMPARISON, source, links, engine)
    with Session(_engine(engine)) as s:
        lock_chain(s)
        spent = _comparison_account(s, fingerprint, epsilons, dp_algorithms, links,
                                    exclude=comparison_id)
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


def show_epsilon(x: Fraction) -> str:
    """ε as the documents print it (6 significant digits)."""
    return f"{float(x):.6g}"


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def epsilon_total(s: Session | None = None) -> Fraction:
    """The site's per-patient cap: the newest audited ``site.epsilon_total_set``, else the
    default (:mod:`~ehr_release.storage.site_policy`)."""
    return site_policy.epsilon_total(s=s)


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
                    exclude=run_id, links=load_links(s, [run_id]).get(run_id))


def run_account(run_id: str, engine: Engine | None = None) -> EpsilonAccount | None:
    """:func:`account` with the registry's DP algorithms, loading only the run's own
    algorithm when it is not DP: a decision and a publication of a k-anonymous release
    need not import every algorithm (LDA's compiled kernels among them) to learn that it
    spends no ε (issue 37 goal 3)."""
    with Session(_engine(engine)) as s:
        run = s.get(ReleaseRun, run_id)
    if run is None or not _differentially_private(run.algorithm):
        return None
    return account(run_id, dp_algorithm_names(), engine)


def _differentially_private(algorithm: str) -> bool:
    from ehr_release import registry
    from ehr_release.core.errors import ParameterError

    try:
        return registry.get(algorithm).differentially_private
    except ParameterError:  # not registered: spends no ε, as in dp_algorithm_names()
        return False


def comparison_account(fingerprint: str, epsilons: Sequence[Fraction],
                       dp_algorithms: Collection[str], engine: Engine | None = None,
                       links: PatientLinks | None = None) -> EpsilonAccount:
    """The account as seen by a comparison whose DP candidates have ``epsilons``."""
    with Session(_engine(engine)) as s:
        return _comparison_account(s, fingerprint, epsilons, dp_algorithms, links)


def patients_account(s: Session, links: PatientLinks,
                     dp_algorithms: Collection[str]) -> EpsilonAccount:
    """What the patients ``links`` describes already carry (a source's history page): the
    same per-patient sum a new DP release of them would be checked against."""
    return _account(s, "", dp_algorithms, Fraction(0), "no further release", exclude=None,
                    links=links)


def _comparison_account(s: Session, fingerprint: str, epsilons: Sequence[Fraction],
                        dp_algorithms: Collection[str],
                        links: PatientLinks | None = None,
                        exclude: str | None = None) -> EpsilonAccount:
    this = sum(epsilons, Fraction(0))
    subject = (f"this comparison's {len(epsilons)} DP candidate{_s(len(epsilons))} "
               f"(ε = {show_epsilon(this)})")
    return _account(s, fingerprint, dp_algorithms, this, subject, exclude=exclude,
                    links=links)


@dataclass(frozen=True)
class _Spender:
    """An earlier DP subject (run or comparison): its ε and which patients it held."""

    subject: str
    epsilon: Fraction
    fingerprint: str
    published: bool
    comparison: bool
    draws: int = 1


def _account(s: Session, fingerprint: str, dp_algorithms: Collection[str], this: Fraction,
             subject: str, exclude: str | None,
             links: PatientLinks | None = None) -> EpsilonAccount:
    """Per patient: the sum of the ε of every earlier DP subject that held them.

    A subject held a patient when the patient's keyed hashes link to its extract's
    (:mod:`ehr_release.history.linkage`). A subject kept without hashes (made before they
    existed), or a current extract without them, is linked the old way: by the whole
    extract's fingerprint — all patients or none.
    """
    spenders = [sp for sp in _run_spenders(s, dp_algorithms) if sp.subject != exclude]
    spenders += [sp for sp in _comparison_spenders(s) if sp.subject != exclude]
    stored = load_links(s, [sp.subject for sp in spenders]) if links is not None else {}
    n = links.patients if links is not None else 1
    import numpy as np  # only here: listing runs needs no numpy

    masks = np.zeros((n, len(spenders)), dtype=bool)
    index = LinkIndex(links) if links is not None else None
    for j, sp in enumerate(spenders):
        earlier = stored.get(sp.subject)
        if index is not None and earlier is not None:
            masks[:, j] = index.meet(earlier)[0]
        else:
            masks[:, j] = sp.fingerprint == fingerprint
    held = masks.any(axis=0)
    runs_held = [sp for sp, h in zip(spenders, held, strict=True) if h and not sp.comparison]
    comps_held = [sp for sp, h in zip(spenders, held, strict=True) if h and sp.comparison]
    patterns, counts = (np.unique(masks, axis=0, return_counts=True) if n and spenders
                        else (np.zeros((1 if n else 0, len(spenders)), dtype=bool),
                              np.array([n] if n else [], dtype=int)))

    def most(pick) -> Fraction:
        return max((sum((sp.epsilon for sp, on in zip(spenders, row, strict=True)
                         if on and pick(sp)), Fraction(0)) for row in patterns),
                   default=Fraction(0))

    per_pattern = [sum((sp.epsilon for sp, on in zip(spenders, row, strict=True) if on),
                       Fraction(0)) + this for row in patterns]
    spread: dict[Fraction, int] = {}
    for value, count in zip(per_pattern, counts, strict=True):
        spread[value] = spread.get(value, 0) + int(count)
    return EpsilonAccount(
        fingerprint, most(lambda sp: True), len(runs_held),
        most(lambda sp: sp.published and not sp.comparison), this, epsilon_total(s),
        compared=most(lambda sp: sp.comparison),
        compared_draws=sum(sp.draws for sp in comps_held), comparisons=len(comps_held),
        subject=subject, patients=links.patients if links is not None else 0,
        distribution=tuple((show_epsilon(v), c) for v, c in sorted(spread.items(), reverse=True)))


def _run_spenders(s: Session, dp_algorithms: Collection[str]) -> list[_Spender]:
    """Every DP run whose release was drawn, or whose ε is reserved and not given back."""
    drawn = select(ArtifactRecord.run_id).where(ArtifactRecord.kind == DRAWN)
    held = and_(col(ReleaseRun.id).in_(_run_events(AuditAction.EPSILON_RESERVED)),
                col(ReleaseRun.id).not_in(_run_events(AuditAction.EPSILON_RELEASED)))
    rows = s.exec(select(ReleaseRun, DatasetRecord.fingerprint)
                  .join(DatasetRecord, ReleaseRun.dataset_id == DatasetRecord.id)
                  .where(col(ReleaseRun.algorithm).in_(list(dp_algorithms)),
                         or_(col(ReleaseRun.id).in_(drawn), held))).all()
    return [_Spender(r.id, run_epsilon(r), fp, r.status == "published", False)
            for r, fp in rows]


def _run_events(action: AuditAction) -> SelectOfScalar[str | None]:
    """The ids of the runs that have an ``action`` event."""
    return select(AuditEvent.run_id).where(AuditEvent.action == action.value,
                                           col(AuditEvent.run_id).is_not(None))


def _comparison_spenders(s: Session) -> list[_Spender]:
    return [_Spender(c, e, fp, False, True, draws=n)
            for c, (n, e, fp) in _comparison_spends(s).items()]


def _holds_reservation(s: Session, run_id: str) -> bool:
    """True if ``run_id`` reserved its ε and did not give it back."""
    actions = set(s.exec(select(AuditEvent.action).where(
        AuditEvent.run_id == run_id,
        col(AuditEvent.action).in_([AuditAction.EPSILON_RESERVED.value,
                                    AuditAction.EPSILON_RELEASED.value]))).all())
    return actions == {AuditAction.EPSILON_RESERVED.value}


def _comparison_spends(s: Session) -> dict[str, tuple[int, Fraction, str]]:
    """(DP candidates, ε, extract fingerprint) each comparison spent: the larger of what it
    reserved and what it drew (``comparison.drawn``), never their sum -- the reservation
    covers the draws; a comparison from before reservations has only its draws."""
    rows = s.exec(select(AuditEvent.action, AuditEvent.payload_json).where(
        col(AuditEvent.action).in_([AuditAction.COMPARISON_DRAWN.value,
                                    AuditAction.EPSILON_RESERVED.value]))).all()
    books: dict[str, dict[str, tuple[int, Fraction]]] = {"drawn": {}, "reserved": {}}
    fingerprints: dict[str, str] = {}
    for action, raw in rows:
        payload = json.loads(raw)
        if "comparison" not in payload:
            continue
        name = str(payload["comparison"])
        fingerprints[name] = str(payload.get("dataset", ""))
        book = books["drawn" if action == AuditAction.COMPARISON_DRAWN else "reserved"]
        n, e = book.get(name, (0, Fraction(0)))
        book[name] = (n + int(payload.get("candidates", 1)),
                      e + Fraction(str(payload["epsilon"])))
    zero = (0, Fraction(0))
    return {c: (max(books["drawn"].get(c, zero)[0], books["reserved"].get(c, zero)[0]),
                max(books["drawn"].get(c, zero)[1], books["reserved"].get(c, zero)[1]),
                fingerprints[c])
            for c in books["drawn"].keys() | books["reserved"].keys()}


def dp_algorithm_names() -> frozenset[str]:
    """Registered algorithms whose guarantee is ε-DP (their runs spend the extract's ε)."""
    from ehr_release import registry

    return frozenset(n for n in registry.names() if registry.get(n).differentially_private)
