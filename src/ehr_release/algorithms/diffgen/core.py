"""Algorithm 1 of DiffGen (Mohammed et al., KDD 2011 / JAMIA 2013), with its ε ledger.

```
ε' = ε / (2·(|numerical| + 2h))
step 0      split point of every numerical root interval       exponential, ε' each
step 1..h   select a candidate v                               exponential, ε'
            numerical v: split points of its 2 new intervals   exponential, ε' (disjoint)
            set-valued v: emptiness test of every child
              combination of every partition holding v         Laplace, ε' (disjoint)
            categorical v: nothing to measure                  0
final       count of every leaf group                          Laplace, ε/2 (+ unused)
```
The remaining-budget policy ``final-counts`` (the authors' code) gives every ε' a step did
not need (categorical steps, unsplittable intervals, an early stop) to the final counts, so
exactly ε is spent; ``discard`` keeps the final counts at ε/2.

Every mechanism call goes through the :class:`~.ledger.Ledger` before it runs. Nothing but
differentially private outputs (the cut, the groups, the noisy counts, the ledger) leaves
this function: no true count, not even how many records an empty-judged partition held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from ehr_release.algorithms.diffgen.encode import Encoded
from ehr_release.algorithms.diffgen.ledger import PARALLEL, SEQUENTIAL, Ledger
from ehr_release.algorithms.diffgen.noise import Exponential, Laplace, NoiseSource
from ehr_release.algorithms.diffgen.scores import SCORES, sensitivity
from ehr_release.algorithms.diffgen.splits import choose_split, split_candidates
from ehr_release.algorithms.diffgen.state import (
    CATEGORICAL,
    NUMERICAL,
    Candidate,
    SearchState,
    interval_label,
)

UNUSED_POLICIES = ("final-counts", "discard")
COUNT_COLUMN = "count"


@dataclass(frozen=True)
class DiffGenParams:
    """Validated run parameters; ``epsilon`` is exact so budget arithmetic is exact."""

    epsilon: Fraction
    h: int
    score: str = "max"
    unused_budget: str = "final-counts"

    def __post_init__(self) -> None:
        if self.epsilon <= 0:
            raise ValueError(f"epsilon must be > 0, got {self.epsilon}")
        if self.h < 1:
            raise ValueError(f"h must be ≥ 1, got {self.h}")
        if self.score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {self.score!r}")
        if self.unused_budget not in UNUSED_POLICIES:
            raise ValueError(f"unused_budget must be one of {UNUSED_POLICIES}")


def epsilon_prime(epsilon: Fraction, n_numerical: int, h: int) -> Fraction:
    """ε' = ε / (2·(|numerical predictors| + 2h)): the budget of one specialization step."""
    return Fraction(epsilon) / (2 * (n_numerical + 2 * h))


def emptiness_threshold(eps1: Fraction) -> float:
    """A child combination is kept when its noisy count exceeds √2/ε' (one noise std)."""
    return math.sqrt(2) / float(eps1)


@dataclass
class DiffGenResult:
    """What a run releases: the groups with noisy counts, the cut and the ledger."""

    groups: pd.DataFrame
    cut: list[dict[str, Any]]
    ledger: Ledger
    epsilon_prime: Fraction
    state: SearchState
    #: Which sampler drew the noise (``OpenDPNoise.name`` in production): a seeded test run
    #: must say so in its own ledger, since anyone with the seed can replay its draws.
    noise: str = "opendp"


class DiffGen:
    """One run: holds the state, the ledger and the noise source while Algorithm 1 runs."""

    def __init__(self, enc: Encoded, params: DiffGenParams, noise: NoiseSource) -> None:
        self.enc = enc
        self.params = params
        self.noise = noise
        self.state = SearchState(enc, params.score)
        self.ledger = Ledger(params.epsilon)
        self.eps1 = epsilon_prime(params.epsilon, len(enc.numerical), params.h)
        self.du = sensitivity(params.score, len(enc.class_values))

    def _choose_point(self, col: int, iv: int, *, step: int, phase: str) -> None:
        """Charge ε' and draw the split point of interval ``iv`` with the exponential
        mechanism; callers only ask for intervals that can be split."""
        k = col - self.state.n_cat
        column = self.enc.numerical[k]
        lo, hi = self.state.intervals[k][iv]
        mech = Exponential(self.eps1, self.du)
        scope, group = (SEQUENTIAL, None) if phase == "initial-split" else (
            PARALLEL, f"step {step}: split points")
        charge = self.ledger.charge(
            mech, step=step, phase=phase, scope=scope, group=group,
            touched=f"records with {column.name} in {interval_label(lo, hi)}",
            detail={"attribute": column.name, "interval": interval_label(lo, hi)})
        values, classes = self.state.interval_records(col, iv)
        cands = split_candidates(values, classes, self.state.ncls, lo, hi, column.domain)
        point, _ = choose_split(cands, self.params.score, mech, self.noise, column.domain)
        self.state.set_point(col, iv, point)
        charge.detail["point"] = int(point) if point.is_integer() else point

    def _initial_splits(self) -> None:
        for k, column in enumerate(self.enc.numerical):
            col = self.state.n_cat + k
            if column.domain.splittable(column.domain.lo, column.domain.hi):
                self._choose_point(col, 0, step=0, phase="initial-split")
            else:
                self.ledger.note(step=0, event="unsplittable domain: no split point drawn",
                                 attribute=column.name)

    def _select(self, step: int, cands: list[Candidate]) -> tuple[Candidate, dict[str, Any]]:
        mech = Exponential(self.eps1, self.du)
        # No count of ``cands``: which values are held depends on partitions a later
        # emptiness test may drop entirely, so no reader of the release could check it.
        charge = self.ledger.charge(
            mech, step=step, phase="selection", scope=SEQUENTIAL,
            touched="all live records (scores of every candidate)")
        chosen = cands[self.noise.exponential(self.state.scores(cands), mech.scale)]
        charge.detail.update(attribute=self.state.names[chosen.col], kind=chosen.kind,
                             value=self.state.node_name(chosen.col, chosen.value))
        return chosen, charge.detail

    def _specialize(self, step: int, chosen: Candidate, detail: dict[str, Any]) -> None:
        st = self.state
        if chosen.kind == CATEGORICAL:
            children = st.specialize_categorical(chosen.col, chosen.value)
            detail["children"] = [st.node_name(chosen.col, c) for c in children]
            self.ledger.note(step=step, event="categorical specialization: nothing measured")
        elif chosen.kind == NUMERICAL:
            k = chosen.col - st.n_cat
            point = st.points[k][chosen.value]
            detail["point"] = int(point) if point is not None and point.is_integer() else point
            new = st.specialize_numerical(chosen.col, chosen.value)
            detail["children"] = [st.node_name(chosen.col, c) for c in new]
            dom = self.enc.numerical[k].domain
            splittable = [iv for iv in new if dom.splittable(*st.intervals[k][iv])]
            for iv in splittable:
                self._choose_point(chosen.col, iv, step=step, phase="split")
            if not splittable:
                self.ledger.note(step=step, event="new intervals cannot be split: "
                                 "no split point drawn")
        else:
            self._emptiness(step, chosen, detail)

    def _emptiness(self, step: int, chosen: Candidate, detail: dict[str, Any]) -> None:
        st = self.state
        split = st.prepare_set(chosen.value)
        children = st.enc.set_valued.index.children[chosen.value]
        detail["children"] = [st.node_name(chosen.col, c) for c in children]
        mech = Laplace(self.eps1)
        threshold = emptiness_threshold(self.eps1)
        name = st.node_name(chosen.col, chosen.value)
        # No number of partitions tested nor of combinations kept: some are dropped entirely
        # by a later test, which the release does not show, so no reader could check them.
        self.ledger.charge(
            mech, step=step, phase="emptiness", scope=PARALLEL,
            group=f"step {step}: emptiness tests",
            touched=f"records of every partition holding {name}, "
                    f"{len(split.combos)} disjoint child combinations each",
            detail={"node": name, "combinations": len(split.combos),
                    "threshold": threshold})
        noisy = self.noise.laplace(split.counts.ravel(), mech.scale)
        keep = (noisy > threshold).reshape(split.counts.shape)
        st.apply_set(split, keep)

    def run(self) -> DiffGenResult:
        """Run Algorithm 1 and return the release (see the module docstring)."""
        self._initial_splits()
        h = self.params.h
        for step in range(1, h + 1):
            cands = self.state.candidates()
            if not cands:
                self.ledger.note(step=step, event="no candidate left: stopped early",
                                 skipped_steps=h - step + 1)
                break
            chosen, detail = self._select(step, cands)
            self._specialize(step, chosen, detail)
        return self._release(final_step=h + 1)

    def _release(self, final_step: int) -> DiffGenResult:
        st = self.state
        budget = (self.ledger.remaining() if self.params.unused_budget == "final-counts"
                  else self.params.epsilon / 2)
        mech = Laplace(budget)
        parts, counts = st.group_counts()
        order = st.partition_order(parts)
        parts, counts = parts[order], counts[order]
        self.ledger.charge(
            mech, step=final_step, phase="final-counts", scope=PARALLEL,
            group="final counts",
            touched=f"all live records in {counts.size} disjoint groups "
                    f"({len(parts)} partitions × {st.ncls} classes)",
            detail={"groups": int(counts.size), "policy": self.params.unused_budget})
        noisy = self.noise.laplace(counts.ravel(), mech.scale)
        released = np.maximum(noisy, 0)  # rounding is exact already; clamping is free
        labels = st.partition_labels(parts)
        frame = pd.DataFrame({name: np.repeat(values, st.ncls)
                              for name, values in labels.items()})
        frame[self.enc.class_column] = np.tile(np.array(self.enc.class_values, dtype=object),
                                               len(parts))
        frame[COUNT_COLUMN] = released.astype(np.int64)
        return DiffGenResult(frame, st.cut_description(), self.ledger, self.eps1, st,
                             self.noise.name)


def run_diffgen(enc: Encoded, params: DiffGenParams, noise: NoiseSource) -> DiffGenResult:
    """Run DiffGen on an encoded dataset (see :class:`DiffGen`)."""
    return DiffGen(enc, params, noise).run()
