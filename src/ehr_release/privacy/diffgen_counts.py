"""The counts of a DiffGen release, checked against the original data (issue 14, finding 3).

A ledger only says what noise *should* have been added. This module checks what was
published: it recomputes the true count of every released (group, class) from the original
records and the released cut, and tests two things.

**Every group of the cut is present.** Categorical and numerical specializations create
every child partition whether or not it holds records; only a set-valued specialization
drops child combinations, and only by a noisy (ε-DP) emptiness decision. So the verifier
replays the ledger's specializations over the *released* partitions generalized back to each
step (:func:`missing_groups`): after a categorical or numerical step, every child of every
partition that held the specialized value must have a released descendant -- unless a later
set-valued step could have pruned it (its cut-set holds a node specialized later). A group
left out because it was truly empty (which reveals that it was empty) fails here.

**The residuals are not implausibly small** (:func:`too_many_small`). The final counts are
integers: ``released = max(true + Z, 0)`` with ``Z`` discrete Laplace (OpenDP ``make_laplace``
on an integer domain; the test-mode sampler draws the same law as a difference of two
geometrics), ``P(Z = z) = (1 − α)/(1 + α)·α^|z|``, ``α = exp(−1/s)`` for the ledger's scale
``s``. Hence ``P(|Z| ≤ m) = 1 − 2α^(m+1)/(1 + α)`` and ``P(Z ≤ m) = 1 − α^(m+1)/(1 + α)``.

* Window: ``m`` is the largest integer ≥ 0 with ``q = P(|Z| ≤ m) ≤ 1/4`` (``m = 0`` when even
  ``P(Z = 0) = tanh(1/(2s))`` exceeds 1/4, i.e. s < 1.96). It depends on the declared scale
  only, never on the data.
* A residual ``r = released − true`` is *small* when ``|r| ≤ m``. Under the mechanism, a group
  with true count ``c > m`` is small with probability exactly ``q``; one with ``c ≤ m``
  (clamping at 0 folds ``Z < −c`` onto ``r = −c``) exactly with ``q0 = P(Z ≤ m) = (1 + q)/2``.
  The noise of different groups is independent, so the number of small residuals is
  ``X = Bin(n1, q) + Bin(n0, q0)`` exactly (n1, n0: groups with c > m, c ≤ m).
* One-sided test: ``T`` is the smallest ``t`` with ``P(X > t) ≤ 10⁻⁶`` (exact convolution of the
  two binomials); the release fails when ``X > T``. The false-alarm rate of an honest
  release is therefore at most :data:`FALSE_ALARM` = 10⁻⁶, whatever its size.
* Power: published exact counts make every residual small (``X = n``), which is flagged as
  soon as ``q^n1 · q0^n0 ≤ 10⁻⁶``: with ``q ≤ 1/4``, 10 groups of true count > m suffice
  (``0.25^10 ≈ 9.5·10⁻⁷``); at ε = 1 (s ≈ 1.86, m = 0, q ≈ 0.26) 11 such groups; an empty
  group weighs less (q0 ≤ 5/8: about 30 of them). Noise much narrower than declared is caught
  the same way. A release with fewer groups than that cannot be told from an honest one --
  the test says so in its measurement instead of pretending.
* The verifier runs this test at 10⁻⁶/7, its Bonferroni share beside the six two-sided
  tests of :mod:`.diffgen_noise` (fit, mean, variance, residues mod 2, 3, 4), which catch
  what it cannot see: counts off by a constant, parity pushed, noise narrower than declared
  with an honest share of exact counts (issue 32). At that share exact counts are caught
  from 12 groups of true count > m at ε = 1 instead of 11.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from scipy import signal, stats

from ehr_release.configuration.taxonomies import DiffGenConfig
from ehr_release.model.dataset import CODE, PATIENT_ID, Dataset
from ehr_release.model.hierarchy import Hierarchy

#: Probability that an honest release fails the residual test.
FALSE_ALARM = 1e-6
#: The window is widened while the chance of a small residual stays at most this.
WINDOW_MASS = 0.25
_INTERVAL = re.compile(r"^\[([^,]+),([^)]+)\)$")


# --------------------------------------------------------------------------- the noise law
def _alpha(scale: float) -> float:
    return math.exp(-1.0 / scale)


def discrete_laplace_zero(scale: float) -> float:
    """P(Z = 0) of the discrete Laplace of ``scale``: tanh(1/(2·scale))."""
    return math.tanh(0.5 / scale)


def small_residual_window(scale: float) -> tuple[int, float]:
    """``(m, q)``: the widest window with ``q = P(|Z| ≤ m) ≤ 1/4`` (m = 0 at least)."""
    if not scale > 0 or not math.isfinite(scale):
        raise ValueError(f"a noise scale must be a finite number > 0, got {scale}")
    alpha = _alpha(scale)

    def mass(m: int) -> float:
        return 1.0 - 2.0 * alpha ** (m + 1) / (1.0 + alpha)

    m = max(0, int(math.floor(math.log(3 * (1 + alpha) / 8) / math.log(alpha))) - 1)
    while m > 0 and mass(m) > WINDOW_MASS:
        m -= 1
    while mass(m + 1) <= WINDOW_MASS:
        m += 1
    return m, mass(m)


@dataclass(frozen=True)
class ResidualTest:
    """The outcome of the small-residual test (counts only: nothing about a patient)."""

    groups: int
    small: int
    allowed: int
    window: int
    q: float
    flagged: bool
    groups_needed: int
    alarm: float = FALSE_ALARM

    def text(self) -> str:
        within = "exact (residual 0)" if self.window == 0 else f"within ±{self.window}"
        power = (f"exact counts are caught from {self.groups_needed:,} non-empty groups"
                 if self.groups_needed else "at this noise scale exact counts are expected, "
                 "so this test cannot tell them apart")
        return (f"{self.small:,} of {self.groups:,} counts {within} of the true count; the "
                f"mechanism allows ≤ {self.allowed:,} at false-alarm {self.alarm:.3g} "
                f"({power})")


def _binomial_sum_tail(n1: int, q1: float, n0: int, q0: float) -> np.ndarray:
    """``tail[t] = P(X > t)`` for X = Bin(n1, q1) + Bin(n0, q0), t = 0..n1+n0."""
    pmf1 = stats.binom.pmf(np.arange(n1 + 1), n1, q1)
    pmf0 = stats.binom.pmf(np.arange(n0 + 1), n0, q0)
    small, large = sorted((pmf1, pmf0), key=len)
    pmf = (np.convolve(large, small) if len(small) * len(large) <= 10_000_000
           else np.clip(signal.fftconvolve(large, small), 0.0, None))
    tail = np.cumsum(pmf[::-1])[::-1]  # tail[t] = P(X ≥ t)
    return np.append(tail[1:], 0.0)


def too_many_small(residuals: np.ndarray, true: np.ndarray, scale: float,
                   alarm: float = FALSE_ALARM) -> ResidualTest:
    """The one-sided test of the module docstring on ``released − true`` residuals, at
    false-alarm rate ``alarm`` (the verifier gives it its Bonferroni share of
    :data:`FALSE_ALARM`, beside the two-sided tests of :mod:`.diffgen_noise`)."""
    residuals = np.asarray(residuals, dtype=np.int64)
    true = np.asarray(true, dtype=np.int64)
    m, q = small_residual_window(scale)
    q0 = (1.0 + q) / 2.0
    low = true <= m
    n0, n1 = int(low.sum()), int((~low).sum())
    small = int((np.abs(residuals) <= m).sum())
    tail = _binomial_sum_tail(n1, q, n0, q0)
    allowed = int(np.flatnonzero(tail <= alarm)[0])
    # q = 1 (to double precision): the declared noise is so small that exact counts are
    # what the mechanism publishes; the test then has no power (groups_needed 0) and, with
    # ``allowed`` every group, never flags.
    needed = (1 if q <= 0 else 0 if q >= 1
              else math.ceil(math.log(alarm) / math.log(q)))
    return ResidualTest(len(residuals), small, allowed, m, q, small > allowed, needed, alarm)


# --------------------------------------------------------------------------- true counts
def interval_of(label: str) -> tuple[Fraction, Fraction]:
    """``"[18,37)"`` → (18, 37); raises ValueError on anything else."""
    found = _INTERVAL.match(label)
    if not found:
        raise ValueError("an interval label [lo,hi)")
    return Fraction(found.group(1)), Fraction(found.group(2))


def _cut_ancestor(tree: Hierarchy, cut: set[str]) -> dict[str, str]:
    """Every node of ``tree`` under the cut → its ancestor-or-self in ``cut``."""
    out: dict[str, str] = {}
    for node in [tree.root, *tree.parent]:
        for up in (node, *tree.ancestors(node)):
            if up in cut:
                out[node] = up
                break
    return out


def set_key(nodes: Iterable[str]) -> str:
    """One canonical text for a cut-set, however it was written (order, separator)."""
    return "\x1f".join(sorted(set(nodes)))


def released_set_key(label: str, attr: Mapping[str, Any]) -> str:
    """The canonical key of a released cut-set label (``cut.json`` gives separator, empty)."""
    if label == attr.get("empty", "(none)"):
        return set_key([])
    return set_key(label.split(attr.get("separator", ";")))


def record_keys(original: Dataset, config: DiffGenConfig,
                attrs: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Each original record generalized with the released cut, one key column per predictor
    (released labels; canonical keys for a set-valued attribute) plus the class column."""
    pats = original.patients
    out: dict[str, Any] = {}
    for name, tree in config.categorical.items():
        up = _cut_ancestor(tree, set(attrs[name]["cut"]))
        out[name] = pats[name].astype("string").fillna("").map(up).to_numpy(dtype=object)
    for name in config.numerical:
        cut = sorted((interval_of(x), x) for x in attrs[name]["cut"])
        starts = np.array([float(lo) for (lo, _), _ in cut])
        values = pd.to_numeric(pats[name].astype("string"), errors="coerce").to_numpy(float)
        pos = np.clip(np.searchsorted(starts, values, side="right") - 1, 0, len(cut) - 1)
        out[name] = np.array([label for _, label in cut], dtype=object)[pos]
    for name, tax in config.set_valued.items():
        cut = set(attrs[name]["cut"])
        if tax.tree.root in cut:  # the root stands for every set, the empty one too
            out[name] = np.full(len(pats), set_key([tax.tree.root]), dtype=object)
            continue
        up = _cut_ancestor(tax.tree, cut)
        diag = original.diagnoses
        node = {c: up.get(tax.item_of(c) or "") for c in diag[CODE].astype(str).unique()}
        pairs = pd.DataFrame({"p": diag[PATIENT_ID].to_numpy(),
                              "n": diag[CODE].astype(str).map(node).to_numpy()})
        pairs = pairs.dropna().drop_duplicates()
        keys = pairs.groupby("p")["n"].agg(set_key)
        out[name] = pd.Series(pats.index, index=pats.index).map(keys).fillna(
            set_key([])).to_numpy(dtype=object)
    cls = config.class_column
    out[cls] = pats[cls].astype("string").fillna("").to_numpy(dtype=object)
    return pd.DataFrame(out)


def true_counts(groups: pd.DataFrame, original: Dataset, config: DiffGenConfig,
                attrs: Mapping[str, Mapping[str, Any]]) -> np.ndarray:
    """The true count of every released (group, class) row of ``groups``, in row order."""
    keys = [*config.predictors, config.class_column]
    released = groups[keys].astype(str).copy()
    for name in config.set_valued:
        released[name] = released[name].map(lambda s, a=attrs[name]: released_set_key(s, a))
    sizes = record_keys(original, config, attrs).groupby(keys, dropna=False).size()
    index = pd.MultiIndex.from_frame(released)
    return sizes.reindex(index, fill_value=0).to_numpy(dtype=np.int64)


# --------------------------------------------------------------------------- completeness
@dataclass(frozen=True)
class Step:
    """One specialization the ledger reports: ``attribute`` value → ``children``."""

    attribute: str
    kind: str
    value: str
    children: tuple[str, ...]


def steps_of(ledger: Mapping[str, Any]) -> list[Step]:
    """The selections of the ledger, in order."""
    return [Step(d["attribute"], d["kind"], d["value"], tuple(d["children"]))
            for c in ledger["charges"] if c.get("phase") == "selection"
            for d in [c["detail"]]]


class _Cuts:
    """The cut of every predictor as the steps move it, and a released value's ancestor."""

    def __init__(self, config: DiffGenConfig) -> None:
        self.config = config
        self.cut: dict[str, set[Any]] = {}
        for name, tree in config.categorical.items():
            self.cut[name] = {tree.root}
        for name, tax in config.set_valued.items():
            self.cut[name] = {tax.tree.root}
        for name, dom in config.numerical.items():
            self.cut[name] = {(Fraction(dom.lo), Fraction(dom.hi))}

    def tree(self, name: str) -> Hierarchy:
        if name in self.config.categorical:
            return self.config.categorical[name]
        return self.config.set_valued[name].tree

    def apply(self, step: Step) -> None:
        name = step.attribute
        if name in self.config.numerical:
            old, new = interval_of(step.value), [interval_of(c) for c in step.children]
        else:
            old, new = step.value, list(step.children)
        self.cut[name] = (self.cut[name] - {old}) | set(new)

    def lift(self, name: str, value: Any) -> Any:
        """The ancestor under the current cut of a final released value (parsed)."""
        cut = self.cut[name]
        if name in self.config.numerical:
            lo, hi = value
            return next(iv for iv in cut if iv[0] <= lo and hi <= iv[1])
        tree = self.tree(name)
        if name in self.config.categorical:
            return next(n for n in (value, *tree.ancestors(value)) if n in cut)
        if not value:  # the empty set: the root until the root is specialized
            return frozenset({tree.root}) if tree.root in cut else frozenset()
        return frozenset(next(n for n in (v, *tree.ancestors(v)) if n in cut)
                         for v in value)


def missing_groups(groups: pd.DataFrame, config: DiffGenConfig, steps: list[Step],
                   attrs: Mapping[str, Mapping[str, Any]]) -> tuple[int, str | None]:
    """How many partitions the cut requires but the release lacks, and the first step where
    one is missing (see the module docstring). ``groups`` rows are the released groups."""
    names = list(config.predictors)
    parts = groups[names].astype(str).drop_duplicates()
    ids: dict[Any, int] = {}  # every (lifted) value gets one integer: partitions are int rows
    values: list[Any] = []

    def iid(value: Any) -> int:
        if value not in ids:
            ids[value] = len(values)
            values.append(value)
        return ids[value]

    columns: list[tuple[list[Any], np.ndarray]] = []  # per predictor: unique values, inverse
    for name in names:
        codes, uniq = pd.factorize(parts[name])
        if name in config.numerical:
            parsed = [interval_of(u) for u in uniq]
        elif name in config.set_valued:
            a = attrs[name]
            parsed = [frozenset() if u == a.get("empty", "(none)")
                      else frozenset(u.split(a.get("separator", ";"))) for u in uniq]
        else:
            parsed = list(uniq)
        columns.append((parsed, codes))
    set_cols = [i for i, n in enumerate(names) if n in config.set_valued]
    set_steps = [(t, s.value) for t, s in enumerate(steps) if s.kind == "set-valued"]
    cuts = _Cuts(config)

    def snapshot() -> set[tuple[int, ...]]:
        if not names:
            return {()}
        lifted = [np.array([iid(cuts.lift(n, v)) for v in uniq], dtype=np.int64)[codes]
                  for n, (uniq, codes) in zip(names, columns, strict=True)]
        rows = np.unique(np.stack(lifted, axis=1), axis=0)
        return set(map(tuple, rows.tolist()))

    before = snapshot()
    missing, first = 0, None
    for t, step in enumerate(steps):
        cuts.apply(step)
        after = snapshot()
        if step.kind in ("categorical", "numerical"):
            col = names.index(step.attribute)
            num = step.kind == "numerical"
            value = iid(interval_of(step.value) if num else step.value)
            kids = [iid(interval_of(c) if num else c) for c in step.children]
            later = {v for u, v in set_steps if u > t}
            for part in before:
                if part[col] != value:
                    continue
                if any(later & values[part[i]] for i in set_cols):
                    continue  # a later noisy emptiness test may have pruned a child
                for kid in kids:
                    if (*part[:col], kid, *part[col + 1:]) not in after:
                        missing += 1
                        first = first or f"step {t + 1} ({step.attribute})"
        before = after
    return missing, first
