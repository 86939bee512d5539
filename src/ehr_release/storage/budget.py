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

Limits (why this is an account of one extract, not of the patients): an extract that differs
by one record has another fingerprint, so overlapping extracts of the same patients are not
summed; the site must keep to one extract per cohort for the cap to mean what it says.

Site policy: :data:`EPSILON_TOTAL_ENV` (a positive number) is the most ε the drawn DP
releases of one extract may spend together; an approval or a publish that would go beyond
it is refused. Unset, nothing is refused, and the reviewer still sees the account.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass
from fractions import Fraction

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ehr_release.errors import ConfigError, EhrReleaseError
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.models import ArtifactRecord, DatasetRecord, ReleaseRun

#: Site policy: the total ε one source extract may spend over all its DP releases.
EPSILON_TOTAL_ENV = "EHR_RELEASE_EPSILON_TOTAL"
#: The artifact kind of a drawn release (:func:`~ehr_release.storage.runs.pin_candidate`).
DRAWN = "candidate"


@dataclass(frozen=True)
class EpsilonAccount:
    """ε of one run against what other runs already spent on the same extract.

    ``earlier`` is the sum over ``releases`` other DP runs whose release was drawn, of which
    ``published`` were published; ``total`` the site's cap, None when the site set none.
    """

    fingerprint: str
    earlier: Fraction
    releases: int
    published: Fraction
    this_run: Fraction
    total: Fraction | None

    @property
    def after(self) -> Fraction:
        return self.earlier + self.this_run

    @property
    def exceeded(self) -> bool:
        return self.total is not None and self.after > self.total

    def text(self) -> str:
        """The account in one sentence for the reviewer (no data: ε and run counts)."""
        cap = ("no site total is set (EHR_RELEASE_EPSILON_TOTAL)" if self.total is None
               else f"site total ε = {_show(self.total)}"
               + (" — EXCEEDED" if self.exceeded else ""))
        return (f"ε spent on this extract by {self.releases} other differentially private "
                f"run{'s' if self.releases != 1 else ''} whose release was drawn: "
                f"{_show(self.earlier)} (published: {_show(self.published)}); with this "
                f"release: {_show(self.after)} ({cap}). Releases of the same records compose, "
                "and so does choosing among draws after a rejection: their ε add up.")


class EpsilonBudgetExhausted(EhrReleaseError):
    """Drawing this DP release would take its extract beyond the site's total ε."""


def refuse_beyond_total(run_id: str, dp_algorithms: Collection[str],
                        engine: Engine | None = None) -> EpsilonAccount | None:
    """The run's account; raises before a draw the extract's ε cannot pay for.

    Called before the anonymizer runs: a draw beyond the total would itself count (the
    steward sees it), so it is never made.

    Raises
    ------
    EpsilonBudgetExhausted
        The site set a total and this run's ε would take the extract beyond it.
    """
    spent = account(run_id, dp_algorithms, engine)
    if spent is not None and spent.exceeded:
        raise EpsilonBudgetExhausted("this release would exceed the ε budget of its "
                                     "extract: " + spent.text())
    return spent


def _show(x: Fraction) -> str:
    return f"{float(x):.6g}"


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


def run_epsilon(run: ReleaseRun) -> Fraction:
    """The ε a run's parameters give it (0 if it has none)."""
    value = json.loads(run.parameters_json).get("epsilon")
    return Fraction(0) if value is None else Fraction(str(value))


def account(run_id: str, dp_algorithms: Collection[str],
            engine: Engine | None = None) -> EpsilonAccount | None:
    """The extract's ε account as seen by ``run_id``; None if its algorithm is not DP."""
    with Session(_engine(engine)) as s:
        run = s.get(ReleaseRun, run_id)
        if run is None or run.algorithm not in dp_algorithms:
            return None
        fingerprint = s.get(DatasetRecord, run.dataset_id).fingerprint
        drawn = select(ArtifactRecord.run_id).where(ArtifactRecord.kind == DRAWN)
        others = s.exec(
            select(ReleaseRun).join(DatasetRecord, ReleaseRun.dataset_id == DatasetRecord.id)
            .where(DatasetRecord.fingerprint == fingerprint, ReleaseRun.id != run_id,
                   col(ReleaseRun.algorithm).in_(list(dp_algorithms)),
                   col(ReleaseRun.id).in_(drawn))).all()
        earlier = sum((run_epsilon(r) for r in others), Fraction(0))
        published = sum((run_epsilon(r) for r in others if r.status == "published"),
                        Fraction(0))
        return EpsilonAccount(fingerprint, earlier, len(others), published, run_epsilon(run),
                              epsilon_total())


def dp_algorithm_names() -> frozenset[str]:
    """Registered algorithms whose guarantee is ε-DP (their runs spend the extract's ε)."""
    from ehr_release import registry

    return frozenset(n for n in registry.names() if registry.get(n).differentially_private)
