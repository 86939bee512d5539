"""A source's history for people: its releases, their overlap, ε per patient, what binds next.

Read by ``ehr-release history`` and the dashboard's history page. Value-free: run ids,
parameters, statuses, counts and ε.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ehr_release.history.checks import HELD_STATUSES, Strength, run_strength
from ehr_release.history.linkage import LinkIndex, PatientLinks
from ehr_release.storage.budget import (
    EpsilonAccount,
    dp_algorithm_names,
    patients_account,
    run_epsilon,
    show_epsilon,
)
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.links import RUN, load_links
from ehr_release.storage.models import ExtractLinks, ReleaseRun
from ehr_release.storage.site_policy import epsilon_total, sources, weaker_policy


@dataclass(frozen=True)
class ReleaseLine:
    run_id: str
    algorithm: str
    parameters: str
    status: str
    patients: int
    created_at: str
    epsilon: str | None  # DP runs only


@dataclass(frozen=True)
class SourceHistory:
    """One source's releases and what they mean for the next one."""

    source: str
    releases: list[ReleaseLine]
    overlaps: list[tuple[str, str, int, int, int]]  # (later, earlier, shared, only later,
    #                                                   only earlier), overlapping pairs only
    patients: int  # distinct patients seen (by id within the source)
    epsilon_max: str
    epsilon_distribution: list[tuple[str, int]]  # (ε carried, patients), most first
    epsilon_total: str
    binding: list[str] = field(default_factory=list)


def source_history(source: str | None = None, engine: Engine | None = None,
                   limit: int = 200) -> list[SourceHistory]:
    """The history of ``source`` (default: every registered source with releases)."""
    names = [source] if source else sources(engine)
    with Session(_engine(engine)) as s:
        total = epsilon_total(s=s)
        policy = weaker_policy(s=s)
        out = []
        for name in names:
            rows = s.exec(select(ReleaseRun, ExtractLinks.subject)
                          .join(ExtractLinks, ExtractLinks.subject == ReleaseRun.id)
                          .where(ExtractLinks.source == name, ExtractLinks.kind == RUN)
                          .order_by(col(ReleaseRun.created_at)).limit(limit)).all()
            if not rows and source is None:
                continue
            links = load_links(s, [r.id for r, _ in rows])
            everyone = _union(list(links.values()))
            # the budget's own per-patient account: every DP run and comparison draw that
            # held any of these patients, whatever source it was filed under
            carried = patients_account(s, everyone, dp_algorithm_names())
            out.append(_history(name, [r for r, _ in rows], links, everyone.patients,
                                carried, total, policy.allowed))
        return out


def _history(name: str, runs: list[ReleaseRun], links: dict[str, PatientLinks],
             patients: int, carried: EpsilonAccount, total: Fraction,
             weaker_allowed: bool) -> SourceHistory:
    lines = [ReleaseLine(r.id, r.algorithm, _params(r), r.status, links[r.id].patients,
                         r.created_at, show_epsilon(run_epsilon(r)) if _is_dp(r) else None)
             for r in runs]
    pairs = []
    for i, later in enumerate(runs):
        index = LinkIndex(links[later.id])
        for earlier in runs[:i]:
            meet = index.overlap(links[earlier.id])
            if not meet.disjoint:
                pairs.append((later.id, earlier.id, meet.shared, meet.only_current,
                              meet.only_earlier))
    distribution = list(carried.distribution) if patients else []
    return SourceHistory(
        name, lines, pairs, patients, show_epsilon(carried.earlier), distribution,
        show_epsilon(total), _binding(runs, total - carried.earlier, weaker_allowed))


def _binding(runs: list[ReleaseRun], left: Fraction, weaker_allowed: bool) -> list[str]:
    """What the next release of these patients must respect."""
    held = [(r, p) for r in runs if r.status in HELD_STATUSES
            and (p := run_strength(r)) is not None]
    out = []
    by_model: dict[str, Strength] = {}
    for _, promise in held:
        best = by_model.get(promise.model)
        if best is None or (promise.k, promise.m) > (best.k, best.m):
            by_model[promise.model] = promise
    for promise in by_model.values():
        out.append(f"a syntactic release of these patients must promise at least "
                   f"{promise.words()}"
                   + (" (the site allows weaker re-releases, with its reason printed)"
                      if weaker_allowed else ""))
    if held:
        out.append("a release that differs from an earlier one by fewer than k patients "
                   "is refused unless the history attack attributes nothing")
    out.append(f"differentially private releases: ε ≤ {show_epsilon(max(left, Fraction(0)))} left "
               "for the patient who carries the most")
    return out


def _union(parts: list[PatientLinks]) -> PatientLinks:
    """Every patient seen, once (by id hash within the source)."""
    if not parts:
        return PatientLinks(np.array([], dtype="S16"), np.array([], dtype="S16"))
    ids = np.concatenate([p.ids for p in parts])
    contents = np.concatenate([p.contents for p in parts])
    _, first = np.unique(ids, return_index=True)
    first.sort()
    return PatientLinks(ids[first], contents[first])


def _is_dp(run: ReleaseRun) -> bool:
    return run.algorithm in dp_algorithm_names()


def _raw(run: ReleaseRun) -> dict:
    return json.loads(run.parameters_json)


def _params(run: ReleaseRun) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(_raw(run).items()) if k != "seed")
