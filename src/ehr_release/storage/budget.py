"""The ε spent on one source extract across differentially private releases.

ε composes: k releases of the same records at ε each are, together, a kε release, whatever
each ledger says about itself. A release's own ledger (``ledger.json``) cannot see the
others, so this module keeps the account per *source*: the SHA-256 fingerprint of the
ingested extract (:class:`~ehr_release.storage.models.DatasetRecord`). The runs table already
holds everything needed -- each run's dataset, algorithm, parameters and status -- so the
account is a query, not a second copy that could drift from it.

Counted: runs of a differentially private algorithm on an extract with the same fingerprint
that were *approved* or *published* (an approved run is about to publish: counting it keeps
two approvals in a row from both fitting under the cap). Not counted: rejected and failed
runs, and the evaluation's own DiffGen runs, which publish nothing.

Limits (why this is an account of one extract, not of the patients): an extract that differs
by one record has another fingerprint, so overlapping extracts of the same patients are not
summed; the site must keep to one extract per cohort for the cap to mean what it says.

Site policy: :data:`EPSILON_TOTAL_ENV` (a positive number) is the most ε all approved and
published releases of one extract may spend together; an approval or a publish that would
go beyond it is refused. Unset, nothing is refused, and the reviewer still sees the account.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass
from fractions import Fraction

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ehr_release.errors import ConfigError
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.models import DatasetRecord, ReleaseRun

#: Site policy: the total ε one source extract may spend over all its DP releases.
EPSILON_TOTAL_ENV = "EHR_RELEASE_EPSILON_TOTAL"
#: Statuses whose ε counts as spent (or committed: approved runs publish next).
SPENDING = ("approved", "published")


@dataclass(frozen=True)
class EpsilonAccount:
    """ε of one run against what other runs already spent on the same extract.

    ``earlier`` is the sum over ``releases`` other approved or published DP runs; ``total``
    the site's cap, None when the site set none.
    """

    fingerprint: str
    earlier: Fraction
    releases: int
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
        return (f"ε spent on this extract by {self.releases} other approved or published "
                f"differentially private release{'s' if self.releases != 1 else ''}: "
                f"{_show(self.earlier)}; with this release: {_show(self.after)} ({cap}). "
                "Releases of the same records compose: their ε add up.")


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
        others = s.exec(
            select(ReleaseRun).join(DatasetRecord, ReleaseRun.dataset_id == DatasetRecord.id)
            .where(DatasetRecord.fingerprint == fingerprint, ReleaseRun.id != run_id,
                   col(ReleaseRun.algorithm).in_(list(dp_algorithms)),
                   col(ReleaseRun.status).in_(SPENDING))).all()
        earlier = sum((run_epsilon(r) for r in others), Fraction(0))
        return EpsilonAccount(fingerprint, earlier, len(others), run_epsilon(run),
                              epsilon_total())


def dp_algorithm_names() -> frozenset[str]:
    """Registered algorithms whose guarantee is ε-DP (their runs spend the extract's ε)."""
    from ehr_release import registry

    return frozenset(n for n in registry.names() if registry.get(n).differentially_private)
