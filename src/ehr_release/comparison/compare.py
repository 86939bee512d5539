"""Planning and judging a side-by-side comparison of algorithms on one dataset.

A steward states a grid (``k=5,10,25``) and requirements (``k>=10``, a loss ceiling); every
algorithm × grid point becomes a :class:`Candidate`, each is anonymized and verified on its
own, and :func:`recommend` picks the least-loss candidate that verified *and* meets the
requirements. Nothing here runs an algorithm: the flow does that, this module only plans and
judges, so it is tested without Prefect.

Losses of different algorithms are comparable only when they measure the same thing; the
loss used for each row is named in the report (``--metric`` overrides an algorithm's
headline loss).
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ehr_release.core.errors import ParameterError
from ehr_release.registry import AlgorithmEntry

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "=": operator.eq,
    ">": operator.gt, "<": operator.lt}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*(>=|<=|==|=|>|<)\s*(-?[\d.]+(?:e-?\d+)?)\s*$")


@dataclass(frozen=True)
class Candidate:
    """One algorithm at one point of the grid."""

    index: int
    algorithm: str
    params: dict[str, str]
    #: ε-DP: shown, never recommended nor released from (AlgorithmEntry.differentially_private)
    differentially_private: bool = False

    @property
    def label(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.algorithm} ({shown})" if shown else self.algorithm


@dataclass(frozen=True)
class Requirement:
    """A stated requirement on a parameter, e.g. ``k>=10``."""

    param: str
    op: str
    value: float

    def __str__(self) -> str:
        return f"{self.param} {self.op} {self.value:g}"

    def met_by(self, params: Mapping[str, Any]) -> bool:
        raw = params.get(self.param)
        try:
            return raw is not None and _OPS[self.op](float(raw), self.value)
        except (TypeError, ValueError):
            return False


@dataclass
class Outcome:
    """What one candidate produced: the verdict, its loss and every utility metric."""

    candidate: Candidate
    verified: bool
    loss_metric: str | None
    loss: float | None
    metrics: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["candidate"] = asdict(self.candidate) | {"label": self.candidate.label}
        return out


def parse_grid(specs: Iterable[str]) -> dict[str, list[str]]:
    """``["k=5,10,25", "m=1,2"]`` → ``{"k": ["5","10","25"], "m": ["1","2"]}``."""
    grid: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip()
        points = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name or not points:
            raise ParameterError("--param-grid", "must look like NAME=V1,V2,...", spec)
        if name in grid:
            raise ParameterError("--param-grid", "names a parameter twice", name)
        grid[name] = points
    return grid


def parse_requirement(spec: str) -> Requirement:
    match = _REQUIREMENT.match(spec)
    if match is None:
        raise ParameterError("--require", "must look like NAME>=NUMBER (or <=, >, <, ==)", spec)
    return Requirement(match[1], match[2], float(match[3]))


def plan(entries: Sequence[AlgorithmEntry], fixed: Mapping[str, str],
         grid: Mapping[str, Sequence[str]]) -> list[Candidate]:
    """Every algorithm × every grid point, each checked by the algorithm's own parameters.

    A grid or fixed parameter that an algorithm does not take is dropped *for that algorithm*
    (DiffGen has no k); an invalid value is an error naming algorithm, parameter and value.
    """
    if not entries:
        raise ParameterError("--algorithm", "give at least one algorithm to compare", "")
    names = list(grid)
    candidates: list[Candidate] = []
    for entry in entries:
        accepted = {p.name for p in entry.params}
        own_grid = [n for n in names if n in accepted]
        if names and not own_grid:
            raise ParameterError("--param-grid", f"none of {', '.join(names)} is a parameter "
                                 f"of {entry.name}", entry.name)
        for point in itertools.product(*(grid[n] for n in own_grid)):
            params = {k: v for k, v in fixed.items() if k in accepted}
            params.update(zip(own_grid, point, strict=True))
            try:
                entry.parse(params)
            except ParameterError as exc:
                raise ParameterError(exc.parameter, f"{exc.rule} (algorithm {entry.name})",
                                     exc.value) from None
            # Rows are numbered from 1 wherever they are shown: the report, the HTML and
            # PDF, the progress lines, Prefect's task names and `run --row`.
            candidates.append(Candidate(len(candidates) + 1, entry.name, params,
                                        entry.differentially_private))
    return candidates


def loss_of(metrics: Mapping[str, float], metric: str | None) -> float | None:
    """The named loss, or None if the release did not report it (or it is not a number)."""
    if metric is None or metric not in metrics:
        return None
    value = float(metrics[metric])
    return None if math.isnan(value) else value


#: Why a comparison never recommends an ε-DP row (nor releases from one).
DP_NOT_CHOSEN = ("ε-differentially private, and its utility here was measured on the true "
                 "data: choosing its ε or h from this comparison would spend privacy budget "
                 "the ledger does not count, so it is shown but never recommended nor "
                 "released from (choose ε and h before looking at the data)")


def recommend(outcomes: Sequence[Outcome], requirements: Sequence[Requirement],
              max_loss: float | None = None) -> tuple[Outcome | None, list[str]]:
    """The least-loss outcome that verified and meets every requirement, and why others lost.

    Ties go to the later candidate (for an ascending k grid, the larger k: more privacy for
    the same loss).
    """
    reasons: list[str] = []
    eligible: list[Outcome] = []
    for o in outcomes:
        label = o.candidate.label
        unmet = [str(r) for r in requirements if not r.met_by(o.candidate.params)]
        if o.error:
            reasons.append(f"{label}: failed to run ({o.error})")
        elif o.candidate.differentially_private:
            reasons.append(f"{label}: {DP_NOT_CHOSEN}")
        elif not o.verified:
            reasons.append(f"{label}: verification failed ({'; '.join(o.failures)})")
        elif unmet:
            reasons.append(f"{label}: does not meet {', '.join(unmet)}")
        elif o.loss is None:
            reasons.append(f"{label}: reports no {o.loss_metric or 'loss metric'}")
        elif max_loss is not None and o.loss > max_loss:
            reasons.append(f"{label}: loss {o.loss:.4g} above the ceiling {max_loss:g}")
        else:
            eligible.append(o)
    if not eligible:
        return None, reasons
    best = min(eligible, key=lambda o: (o.loss, -o.candidate.index))
    return best, reasons
