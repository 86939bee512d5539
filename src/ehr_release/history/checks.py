"""Judge a syntactic release with its history: every earlier release of overlapping patients.

Each release alone may hold its model and the pair still break it:

* **Differencing.** Extract E and then E minus one patient: what the first shows and the
  second does not belongs to that patient. A pair whose patient sets differ by fewer than
  k patients on a side (0 < only-here < k) is a *differencing pair*; it is refused unless the
  history attack audit (:mod:`ehr_release.privacy.attacks.history`, which reads only the
  published bytes) attributes nothing to fewer than k patients.
* **Weakening.** k^m with m = 2 and then m = 1 of the same patients voids what the first
  certificate promised. A release weaker on overlapping patients than an earlier one (smaller
  k or m, a weaker model) is refused unless the site allows it
  (:mod:`~ehr_release.storage.site_policy`); then the site's reason is printed on both of the
  new release's documents.
* **Identical re-runs** (same patients, same or stronger parameters) are allowed and shown.

Earlier releases are those parked for review, approved or published (a rejected or failed
run's release never left the site). Differentially private releases are judged by the
per-patient ε account instead (:mod:`ehr_release.storage.budget`); a syntactic release and a
DP release of the same patients are not judged together (docs/reliability.md says so).

Everything this module writes is value-free: run ids, parameters, counts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ehr_release.core.errors import EhrReleaseError, NotFound
from ehr_release.core.files import sha256_bytes
from ehr_release.history.linkage import LinkIndex, Overlap, PatientLinks
from ehr_release.model.hierarchy import Hierarchy
from ehr_release.model.reports import Requirement
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.links import load_links
from ehr_release.storage.models import ArtifactRecord, ExtractLinks, ReleaseRun
from ehr_release.storage.site_policy import WeakerPolicy, weaker_policy

#: Statuses whose release may reach (or reached) a recipient.
HELD_STATUSES = ("awaiting_approval", "approved", "published")
HISTORY = "release history"

#: Each syntactic model's knowledge (m: codes the attacker knows; ∞ = the whole record) and
#: rank (k-map over a population is weaker than k-anonymity within the release).
_MODELS: dict[str, tuple[str, int]] = {
    "disassociation": ("k^m-anonymity", 1),
    "artuc": ("(k, k^m)-anonymity", 1),
    "artuc-baseline": ("(k, k^m)-anonymity", 1),
    "artuc-unconstrained": ("(k, k^m)-anonymity", 1),
    "rmr": ("(k, k^m)-anonymity", 1),
    "gccens": ("k-map", 0),
    "lda": ("k-anonymity of trajectories", 1),
    "lda-baseline": ("k-anonymity of trajectories", 1),
}


@dataclass(frozen=True)
class Strength:
    """What a syntactic release promises: k, the attacker's m, and the model's rank."""

    model: str
    k: int
    m: float
    rank: int

    def words(self) -> str:
        m = "" if math.isinf(self.m) else f" m={int(self.m)}"
        return f"{self.model} k={self.k}{m}"

    def weaker_than(self, other: Strength) -> list[str]:
        """Why this promise is weaker than ``other``'s (empty: it is not)."""
        why = []
        if self.k < other.k:
            why.append(f"k={self.k} < {other.k}")
        if self.m < other.m:
            why.append(f"m={int(self.m)} < {'∞' if math.isinf(other.m) else int(other.m)}")
        if self.rank < other.rank:
            why.append(f"{self.model} is weaker than {other.model}")
        return why


def strength(algorithm: str, params: Mapping[str, Any]) -> Strength | None:
    """The promise of a syntactic release; None for an algorithm judged by ε instead."""
    if algorithm not in _MODELS:
        return None
    model, rank = _MODELS[algorithm]
    m = params.get("m")
    return Strength(model, int(params["k"]), math.inf if m is None else float(m), rank)


def run_strength(run: ReleaseRun) -> Strength | None:
    """The promise of a recorded run, its parameters parsed (defaults applied)."""
    if run.algorithm not in _MODELS:
        return None
    from ehr_release.registry import get

    return strength(run.algorithm, get(run.algorithm).parse(json.loads(run.parameters_json)))


@dataclass(frozen=True)
class EarlierRelease:
    """One earlier release of overlapping patients, as the check sees it."""

    run_id: str
    algorithm: str
    status: str
    strength: Strength
    overlap: Overlap
    files: Mapping[str, bytes] | None  # None: not read, or not readable back intact

    def words(self) -> str:
        o = self.overlap
        how = ("the same patients" if o.identical else
               f"{o.shared:,} shared patients, {o.only_current:,} only here, "
               f"{o.only_earlier:,} only there")
        return f"{self.run_id} ({self.algorithm}, {self.strength.words()}, {self.status}; {how})"


@dataclass(frozen=True)
class HistoryVerdict:
    """The history check's findings, as one requirement for the certificate."""

    current: Strength  # what the judged release promises
    earlier: list[EarlierRelease]
    weaker: list[tuple[EarlierRelease, list[str]]]
    differencing: list[EarlierRelease]
    policy: WeakerPolicy
    attack_passed: bool | None = None
    attack_measured: str = ""
    unreadable: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        weakening_ok = not self.weaker or self.policy.allowed
        differencing_ok = not self.differencing or (self.attack_passed is True
                                                    and not self.unreadable)
        return weakening_ok and differencing_ok

    def requirement(self) -> Requirement:
        return Requirement(
            HISTORY,
            "no differencing pair whose history attack attributes anything to fewer than k "
            "patients; no release weaker than an earlier one of the same patients unless the "
            "site allows it",
            self.measured(), self.holds,
            evidence={"earlier_releases": len(self.earlier),
                      "differencing_pairs": len(self.differencing),
                      "weaker_than": len(self.weaker)})

    def measured(self) -> str:
        if not self.earlier:
            return "no earlier release holds any of these patients"
        parts = [f"released before: {len(self.earlier)} earlier release"
                 f"{'' if len(self.earlier) == 1 else 's'} hold some of these patients — "
                 + "; ".join(e.words() for e in self.earlier)]
        identical = [e for e in self.earlier if e.overlap.identical
                     and not self.current.weaker_than(e.strength)]
        if identical:
            parts.append("identical re-run of " + ", ".join(e.run_id for e in identical)
                         + " (same patients, same or stronger parameters): allowed")
        for e, why in self.weaker:
            parts.append(f"WEAKER than {e.run_id} ({', '.join(why)}): "
                         + ("allowed — " + self.policy.words() if self.policy.allowed
                            else "refused (site policy)"))
        if self.differencing:
            parts.append(f"differencing pair with {', '.join(e.run_id for e in self.differencing)}"
                         f"; history attack: {self.attack_measured or 'not run'}")
        if self.unreadable:
            parts.append("earlier release files missing or changed: "
                         + ", ".join(self.unreadable) + " (cannot be checked: refused)")
        return "; ".join(parts)


def check_history(run_id: str, algorithm: str, params: Mapping[str, Any],
                  files: Mapping[str, bytes], links: PatientLinks,
                  engine: Engine | None = None) -> HistoryVerdict | None:
    """The history verdict of ``run_id``'s release; None for a DP algorithm."""
    current = strength(algorithm, params)
    if current is None:
        return None
    earlier = earlier_releases(run_id, links, engine)
    policy = weaker_policy(engine)
    weaker = [(e, why) for e in earlier if (why := current.weaker_than(e.strength))]
    differencing = [e for e in earlier if _differencing(e, current)]
    verdict = HistoryVerdict(current, earlier, weaker, differencing, policy)
    if not differencing:
        return verdict
    with Session(_engine(engine)) as s:  # read only the pairs the attack needs
        differencing = [replace(e, files=_release_bytes(s, s.get(ReleaseRun, e.run_id)))
                        for e in differencing]
    unreadable = [e.run_id for e in differencing if e.files is None]
    readable = [e for e in differencing if e.files is not None]
    passed, measured = _attack(run_id, algorithm, current, files, readable,
                               _code_hierarchy(run_id, engine))
    return HistoryVerdict(current, earlier, weaker, differencing, policy, passed, measured,
                          unreadable)


def _differencing(e: EarlierRelease, current: Strength) -> bool:
    k = max(current.k, e.strength.k)
    return 0 < e.overlap.only_current < k or 0 < e.overlap.only_earlier < k


def _code_hierarchy(run_id: str, engine: Engine | None) -> Hierarchy:
    """The hierarchy of the code system of ``run_id``'s extract (ICD-9-CM or ICD-10-CM), by
    which every release of the pair is read: earlier releases of these patients from an
    extract in the other system share no term with this one (no mapping is made)."""
    from ehr_release.model.hierarchy import ICD9, code_hierarchy, schema_code_system
    from ehr_release.storage import runs

    try:
        run = runs.get_run(run_id, engine)
        schema = json.loads(runs.get_dataset(run.dataset_id, engine).columns_json)
    except NotFound:  # a run checked before it is registered: the historic default
        return code_hierarchy(ICD9)
    return code_hierarchy(schema_code_system(schema) or ICD9)


def _attack(run_id: str, algorithm: str, current: Strength, files: Mapping[str, bytes],
            earlier: Sequence[EarlierRelease], hierarchy: Hierarchy) -> tuple[bool, str]:
    """Run the history attack audit (privacy/, no algorithm code) on the differencing pairs."""
    if not earlier:
        return False, "no earlier release's bytes could be read"
    from ehr_release.privacy.attacks import history as attack

    report = attack.attack_history(
        attack.HeldRelease(run_id, algorithm, dict(files), current.k),
        [(attack.HeldRelease(e.run_id, e.algorithm, dict(e.files or {}), e.strength.k),
          attack.Overlap(e.overlap.shared, e.overlap.only_current, e.overlap.only_earlier))
         for e in earlier], hierarchy=hierarchy)
    stored = report.stored()
    return report.passed, stored.measured or ("passed" if report.passed else "failed")


def earlier_releases(run_id: str, links: PatientLinks,
                     engine: Engine | None = None) -> list[EarlierRelease]:
    """Every held syntactic release (not ``run_id``) that shares a patient with ``links``
    (its bytes not read yet: ``files`` is None until a differencing pair needs them)."""
    out = []
    index = LinkIndex(links)
    with Session(_engine(engine)) as s:
        rows = s.exec(select(ReleaseRun, ExtractLinks.subject)  # the blobs once, below
                      .join(ExtractLinks, ExtractLinks.subject == ReleaseRun.id)
                      .where(col(ReleaseRun.status).in_(HELD_STATUSES),
                             ReleaseRun.id != run_id)
                      .order_by(col(ReleaseRun.created_at))).all()
        stored = load_links(s, [run.id for run, _ in rows])
        for run, _ in rows:
            promise = run_strength(run)
            if promise is None:
                continue
            meet = index.overlap(stored[run.id])
            if meet.disjoint:
                continue
            out.append(EarlierRelease(run.id, run.algorithm, run.status, promise, meet, None))
    return out


def _release_bytes(s: Session, run: ReleaseRun) -> dict[str, bytes] | None:
    """The earlier release's files, byte-checked against what was pinned; None if any is
    missing or changed (the check then fails closed)."""
    pinned = {a.path: a.sha256 for a in s.exec(select(ArtifactRecord).where(
        ArtifactRecord.run_id == run.id, ArtifactRecord.kind == "candidate")).all()}
    if not pinned:
        return None
    places = _places(s, run)
    out = {}
    for name, sha in pinned.items():
        data = next((d for p in places if (d := _read(p / name)) is not None
                     and sha256_bytes(d) == sha), None)
        if data is None:
            return None
        out[name] = data
    return out


def _places(s: Session, run: ReleaseRun) -> list[Path]:
    """Where an earlier release's bytes may be: its published folder, its parked candidate."""
    from ehr_release.release.bundle import candidate_dir

    published = {Path(a.path).parent for a in s.exec(select(ArtifactRecord).where(
        ArtifactRecord.run_id == run.id, ArtifactRecord.kind == "published")).all()}
    return [*sorted(published), candidate_dir(run.id)]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None


def recheck_before_approval(run_id: str, engine: Engine | None = None) -> HistoryVerdict | None:
    """The history verdict of a parked run, judged again against what is held *now*.

    The release flow judged the run when it was parked; a release of overlapping patients
    parked meanwhile (two flows at once) was not there then. None for a DP run or a run
    without stored links (made before them).
    """
    from ehr_release.registry import get

    with Session(_engine(engine)) as s:
        run = s.get(ReleaseRun, run_id)
        if run is None or run.algorithm not in _MODELS:
            return None
        links = load_links(s, [run_id]).get(run_id)
        files = _release_bytes(s, run) if links is not None else None
    if links is None:
        return None
    if files is None:
        raise EhrReleaseError(f"run {run_id}: its parked release is missing or changed; "
                              f"resume it with `ehr-release resume {run_id}`")
    params = get(run.algorithm).parse(json.loads(run.parameters_json))
    return check_history(run_id, run.algorithm, params, files, links, engine)
