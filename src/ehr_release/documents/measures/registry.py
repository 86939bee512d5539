"""The registry of utility measures (see the package docstring).

A measure is found by a pattern on its reported name (the evaluations name figures like
``ARE W2 (estimator)`` or ``MRE within ±5% (share, uniform item support)``) and, where the
same name means different things in two families (ARE's workloads), by the family too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ehr_release.documents.plain import KKM, format_number

#: How a value is printed: ``share`` (a proportion 0–1, printed as a percentage),
#: ``percent`` (already in %), ``number`` (as it is).
KINDS = ("share", "percent", "number")


@dataclass(frozen=True)
class Measure:
    """One utility measure: ``words`` what it is, ``better`` "lower", "higher" or "" (a
    count that is neither), ``scale`` what good and bad look like, ``kind`` how to print
    it, ``key`` whether it is one of the few the first page reads out (in this order)."""

    pattern: str
    words: str
    better: str
    scale: str
    kind: str = "number"
    families: frozenset[str] | None = None
    key: int = 0

    def matches(self, algorithm: str, name: str) -> bool:
        return (self.families is None or algorithm in self.families) and bool(
            re.search(self.pattern, name))


_NOTHING = "0 is exact; 1 is no better than publishing nothing (every count answered 0)"
_ARE = "average relative error of COUNT queries {w}"
DIS = frozenset({"disassociation"})
DG = frozenset({"diffgen"})
GC = frozenset({"gccens"})

MEASURES: tuple[Measure, ...] = (
    # ----- error of count queries (0 exact, 1 = nothing)
    Measure(r"^ARE W1\b", _ARE.format(w="on two demographics"), "lower", _NOTHING,
            families=KKM, key=3),
    Measure(r"^ARE W2\b", _ARE.format(w="on one demographic and one code"), "lower",
            _NOTHING, families=KKM, key=4),
    Measure(r"^ARE W3\b", _ARE.format(w="on two codes"), "lower", _NOTHING, families=KKM,
            key=5),
    Measure(r"^ARE W1 \(estimator\)", _ARE.format(w="on frequent code sets"), "lower",
            _NOTHING, families=DIS, key=2),
    Measure(r"^ARE W2 \(estimator\)", _ARE.format(w="on random code sets of real records"),
            "lower", _NOTHING, families=DIS, key=1),
    Measure(r"^ARE W1\b", _ARE.format(w="on frequent code sets"), "lower", _NOTHING,
            families=DIS),
    Measure(r"^ARE W2\b", _ARE.format(w="on random code sets of real records"), "lower",
            _NOTHING, families=DIS),
    Measure(r"^CBA ARE W\d", "the same query error for CBA, the generalization method the "
            "paper compares against", "lower", _NOTHING, families=DIS),
    Measure(r"^ARE W(\d)", _ARE.format(w="of one workload"), "lower", _NOTHING),
    Measure(r"^AvgRE$", "average relative error of the (diagnosis, age) COUNT queries",
            "lower", _NOTHING, key=1),
    # ----- information loss (0 as given, 1 all lost)
    Measure(r"^NCP$", "information lost from the demographics", "lower",
            "0 is published as given; 1 is nothing left (every value fully generalized)",
            key=1),
    Measure(r"^UL$", "information lost from the diagnosis codes (generalization plus "
            "suppression)", "lower", "0 is codes as given; higher is vaguer or missing codes",
            key=2),
    Measure(r"^UL generalization$", "the part of UL due to codes replaced by groups of codes",
            "lower", "0 is no code generalized"),
    Measure(r"^UL suppression$", "the part of UL due to deleted codes (per record)", "lower",
            "0 is no code deleted"),
    Measure(r"^ILM\b", "information lost from the diagnosis codes", "lower",
            "0 is as given; 1 is fully generalized", key=2),
    Measure(r"^ALM\b", "information lost from the ages", "lower",
            "0 is as given; 1 is fully generalized", key=3),
    Measure(r"^CUL mean$", "share of a record's repeated code instances removed, on average",
            "lower", "0 % is none removed; 100 % is all", kind="share", key=1),
    Measure(r"^CUL (std|median|skewness)", "spread of the share of repeated code instances "
            "removed per record", "", "describes the spread, not a quality"),
    # ----- shares (printed as %)
    Measure(r"^MRE within ±5% \(share\)$", "share of the utility constraints whose matching "
            "record counts stay within ±5 % of the original", "higher",
            "100 % is every constraint kept; 0 % is none", kind="share", families=DIS, key=3),
    Measure(r"^(CBA )?MRE within", "share of the utility constraints whose matching record "
            "counts stay this close to the original", "higher",
            "100 % is every constraint kept; 0 % is none", kind="share"),
    Measure(r"^MRE (median|min|max)", "signed change of a utility constraint's matching "
            "records (original − release, in % of the original)", "",
            "0 % is exact; positive is matches lost, negative is matches invented",
            kind="percent"),
    Measure(r"^records satisfying", "share of records whose generalization meets the data "
            "owner's utility constraints", "higher", "100 % is every record; 0 % is none",
            kind="share", key=6),
    Measure(r"^share of 2-code sets in one record", "share of code pairs held by a single "
            "patient in the original (how identifying the codes are)", "",
            "the risk without any protection", kind="share"),
    Measure(r"^share of 2-code sets with < k", "share of code pairs leaving fewer than k "
            "candidates in the release", "lower", "0 % is what the guarantee promises",
            kind="share"),
    Measure(r"^share (unique|below k) before", "share of records a population holder could "
            "narrow to one (unique) or to fewer than k before censoring", "",
            "the risk without any protection", kind="share", families=GC),
    Measure(r"^share (unique|below k) after", "the same share after censoring", "lower",
            "0 % is what the guarantee promises", kind="share", families=GC),
    Measure(r"^share of pairs suppressed", "share of (diagnosis, age) pairs removed", "lower",
            "0 % is none removed; 100 % is all", kind="share"),
    Measure(r"^(share|mean share) .*kept", "share of codes kept", "higher",
            "100 % is all kept", kind="share"),
    Measure(r"^share ", "a proportion", "", "between 0 % and 100 %", kind="share"),
    # ----- DiffGen's accuracy (already in %)
    Measure(r"^CA \(%\) mean", "accuracy of a classifier trained on the release, tested on "
            "held-out records", "higher", "near BA is good; at or below LA it is useless",
            kind="percent", families=DG, key=1),
    Measure(r"^BA \(%\) mean", "the same classifier trained on the original", "",
            "the best to hope for", kind="percent", families=DG, key=2),
    Measure(r"^LA \(%\) mean", "always guessing the most common class", "",
            "CA must beat it", kind="percent", families=DG, key=3),
    Measure(r"^(CA|BA|LA) \(%\) std", "spread of that accuracy over the evaluation runs", "",
            "smaller is a steadier figure", kind="percent", families=DG),
    Measure(r"^in-release accuracy", "accuracy of the released groups on the records they "
            "were built from (optimistic)", "higher", "100 % is every record's class right",
            kind="percent"),
    Measure(r"^count error", "how far the released noisy counts are from the true ones",
            "lower", "0 is exact"),
    # ----- comparisons
    Measure(r"^additional utility loss", "how much more information this algorithm loses "
            "than ArtUC, in % of ArtUC's own loss (½·(ΔNCP/NCP + ΔUL/UL))", "",
            "positive is ArtUC keeps more; negative is the other keeps more",
            kind="percent"),
    Measure(r"^baseline ", "the same figure for the generalization baseline", "",
            "for comparison"),
    Measure(r"^(CBA|GenDiag) ", "the same figure for the generalization method the paper "
            "compares against", "", "for comparison"),
)


def measure(algorithm: str, name: str) -> Measure | None:
    """The registered measure a reported figure is, or None when none matches."""
    return next((m for m in MEASURES if m.matches(algorithm, name)), None)


def shown_value(algorithm: str, name: str, value: object) -> str:
    """A figure as printed: shares as percentages ("92.5 %"), others as numbers."""
    m = measure(algorithm, name)
    if m is None or not isinstance(value, int | float) or isinstance(value, bool):
        return format_number(value)
    if isinstance(value, float) and math.isnan(value):
        return format_number(value)
    if m.kind == "share":
        return f"{format_number(100 * float(value))} %"
    if m.kind == "percent":
        return f"{format_number(float(value))} %"
    return format_number(value)


def explain(algorithm: str, name: str) -> str:
    """What a figure means, its scale and which way is better; "" when not registered."""
    m = measure(algorithm, name)
    if m is None:
        return ""
    better = {"lower": "; lower is better", "higher": "; higher is better"}.get(m.better, "")
    if re.search(r"\b(good|useless)\b", m.scale):  # the scale already says which way
        better = ""
    return f"{m.words}: {m.scale}{better}"


def describe(algorithm: str, name: str, value: object) -> str:
    """One line for a reader: "ARE W3 0.78 — average relative error …; 0 is exact, …"."""
    meaning = explain(algorithm, name)
    shown = shown_value(algorithm, name, value)
    return f"{name} {shown} — {meaning}" if meaning else f"{name} {shown}"


def key_measures(algorithm: str, metrics: Mapping[str, float], headline: str | None = None,
                 limit: int = 4) -> list[str]:
    """The names the first page reads out: the headline first, then the family's key
    measures in their order, at most ``limit``."""
    keyed = sorted(((m.key, name) for name in metrics
                    if (m := measure(algorithm, name)) is not None and m.key),
                   key=lambda pair: pair[0])
    names = ([headline] if headline in metrics else []) + [n for _, n in keyed]
    return list(dict.fromkeys(names))[:limit]
