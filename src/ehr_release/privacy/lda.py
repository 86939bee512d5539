"""Independent check of an LDA release: k-anonymity of trajectories, from the bytes.

Nothing here comes from ``ehr_release.algorithms``: the JSON Lines are parsed strictly, the
age hierarchy is rebuilt from its domain (blocks of 2^l years aligned to their size), ICD
ancestry is walked on the shared :class:`~ehr_release.hierarchy.Hierarchy` with plain
parent links (no ancestor tables, no LCAs), and the loss of each record is recomputed with
exact integer arithmetic instead of the algorithm's floats — so a bug in the anonymizer's
alignment, clustering or loss code cannot vouch for itself here.

Requirements (spec §"Verifying releases"): one record per patient; identical published
trajectories form groups of ≥ k; each published trajectory embeds, in order, into its
original (every published value an ancestor-or-self of the original value); the declared
ILM/ALM and settings equal what is recomputed here.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ehr_release.hierarchy import Hierarchy
from ehr_release.privacy.json_lines import (
    MalformedRelease,
    one_record_each,
    release_lines,
    release_meta,
)
from ehr_release.reports import Requirement, VerificationReport

if TYPE_CHECKING:
    from ehr_release.dataset import Dataset

NAME = "lda"
RECORDS_FILE = "trajectories.jsonl"
META_FILE = "lda.json"
LOSS_TOLERANCE = 1e-9  # the algorithm sums floats; this side sums exact integers
_SHOW = 10  # how many offending patients a requirement's evidence names

Pair = tuple[str, tuple[int, int]]  # published: (ICD node, (first age, last age))
Original = Sequence[tuple[str, int]]


@dataclass(frozen=True)
class LdaSettings:
    """What the release must satisfy and how its loss is measured (the run's parameters)."""

    k: int
    w_icd: float = 0.5
    w_age: float = 0.5
    leaf_count: int = 0
    age_first: int = 1
    age_depth: int = 7  # 2**7 = 128 ages: 1–128 in the thesis


class _Trees:
    """Leaf counts, ancestry and the exact cost weights of one verification."""

    def __init__(self, hierarchy: Hierarchy, s: LdaSettings) -> None:
        self.h, self.s = hierarchy, s
        self.age_size = 1 << s.age_depth
        self.age_last = s.age_first + self.age_size - 1
        self._up: dict[str, frozenset[str]] = {}
        self._lc: dict[str, int] = {}
        # cost = w_icd·ΔL_icd/|ICD| + w_age·ΔL_age/|Age|, scaled to integers (exact ties)
        a = Fraction(s.w_icd) / self.icd_size
        b = Fraction(s.w_age) / self.age_size
        scale = math.lcm(a.denominator, b.denominator)
        self.wi, self.wa = int(a * scale), int(b * scale)

    @cached_property
    def icd_size(self) -> int:
        return len(self.h.leaves_under(self.h.root))

    def is_block(self, lo: int, hi: int) -> bool:
        width = hi - lo + 1
        return (self.s.age_first <= lo and hi <= self.age_last and width >= 1
                and width & (width - 1) == 0 and (lo - self.s.age_first) % width == 0)

    def icd_covers(self, node: str, code: str) -> bool:
        if code not in self._up:
            self._up[code] = frozenset([code, *self.h.ancestors(code)])
        return node in self._up[code]

    def icd_l(self, node: str) -> int:
        if node not in self._lc:
            n = len(self.h.leaves_under(node))
            self._lc[node] = self.s.leaf_count if self.h.is_leaf(node) else n
        return self._lc[node]

    def age_l(self, lo: int, hi: int) -> int:
        return self.s.leaf_count if hi == lo else hi - lo + 1


def _parse(files: Mapping[str, bytes], trees: _Trees) -> tuple[list[tuple[str, list[Pair]]],
                                                               dict[str, Any]]:
    records = []
    for no, obj in release_lines(files, RECORDS_FILE, META_FILE, ("patient_id", "trajectory")):
        pid, traj = obj["patient_id"], obj["trajectory"]
        if not isinstance(pid, str) or not isinstance(traj, list):
            raise MalformedRelease(f"line {no}: patient_id must be text and trajectory a list")
        records.append((pid, [_pair(item, no, trees) for item in traj]))
    return records, release_meta(files, META_FILE)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _pair(item: object, no: int, trees: _Trees) -> Pair:
    ok = (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
          and isinstance(item[1], list) and len(item[1]) == 2 and all(map(_is_int, item[1])))
    if not ok:
        raise MalformedRelease(f"line {no}: every pair must look like [\"ICD\", [first, last]]; "
                         f"got {item!r}")
    code, (lo, hi) = item
    if code not in trees.h:
        raise MalformedRelease(f"line {no}: {code!r} is not a node of the ICD hierarchy")
    if not trees.is_block(lo, hi):
        raise MalformedRelease(f"line {no}: [{lo}, {hi}] is not a block of the age hierarchy "
                         f"{trees.s.age_first}–{trees.age_last}")
    return code, (lo, hi)


def cheapest_embedding(trees: _Trees, original: Original,
                       published: Sequence[Pair]) -> tuple[int, int] | None:
    """Loss numerators (ΔL ICD, ΔL Age) of the cheapest in-order embedding, or None.

    Table over (original prefix, published prefix); an original pair is either the image of
    the next published pair (which must cover it in both attributes) or suppressed (charged
    up to both roots). Ties of equal weighted cost go to the smaller ICD loss.
    """
    n, m = len(original), len(published)
    root_i, root_a = trees.icd_l(trees.h.root), trees.age_size
    none = None
    table: list[list[tuple[int, int, int] | None]] = [[none] * (m + 1) for _ in range(n + 1)]
    table[0][0] = (0, 0, 0)
    for h, (code, age) in enumerate(original, start=1):
        oi, oa = trees.icd_l(code), trees.s.leaf_count
        for j in range(min(h, m) + 1):
            options = []
            prev = table[h - 1][j]
            if prev is not None:
                di, da = prev[1] + root_i - oi, prev[2] + root_a - oa
                options.append((trees.wi * di + trees.wa * da, di, da))
            if j:
                node, (lo, hi) = published[j - 1]
                prev = table[h - 1][j - 1]
                if prev is not None and lo <= age <= hi and trees.icd_covers(node, code):
                    di = prev[1] + trees.icd_l(node) - oi
                    da = prev[2] + trees.age_l(lo, hi) - oa
                    options.append((trees.wi * di + trees.wa * da, di, da))
            table[h][j] = min(options) if options else None
    best = table[n][m]
    return None if best is None else (best[1], best[2])


def check_trajectories(files: Mapping[str, bytes], patient_ids: Sequence[str],
               trajectories: Sequence[Original], hierarchy: Hierarchy, settings: LdaSettings,
               algorithm: str = NAME) -> VerificationReport:
    """Re-verify an LDA release.

    Parameters
    ----------
    files
        The release files (``trajectories.jsonl``, ``lda.json``).
    patient_ids, trajectories
        The original data: per patient its (ICD code, age) pairs, ordered by age.
    hierarchy
        The ICD hierarchy the release generalizes into.
    settings
        k, weights, leaf convention and age domain of the run.

    Returns
    -------
    VerificationReport
        Holds only if every requirement passed; a malformed release fails its format check.
    """
    trees = _Trees(hierarchy, settings)
    fmt = (f"{RECORDS_FILE} lines of patient_id and trajectory of [ICD node, age block]; "
           "values are nodes of the hierarchies")
    try:
        records, meta = _parse(files, trees)
    except (MalformedRelease, UnicodeDecodeError) as exc:
        return VerificationReport(algorithm, [Requirement("release format", fmt, str(exc),
                                                          False)])
    reqs = [Requirement("release format", fmt, f"{len(records)} records parsed", True)]
    original = dict(zip(patient_ids, trajectories, strict=True))
    reqs.append(one_record_each(
        "one record per patient", f"each of the {len(original)} patients exactly once",
        original, [pid for pid, _ in records], _SHOW))
    reqs.append(_k_anonymity(records, settings.k))
    known = [(pid, traj) for pid, traj in records if pid in original]
    memo: dict[tuple, tuple[int, int] | None] = {}  # identical (original, published) pairs
    losses = {}
    for pid, traj in known:
        key = (tuple(original[pid]), tuple(traj))
        if key not in memo:
            memo[key] = cheapest_embedding(trees, original[pid], traj)
        losses[pid] = memo[key]
    bad = [pid for pid, loss in losses.items() if loss is None]
    reqs.append(Requirement(
        "truthful generalization", "every published trajectory embeds in order into its "
        "original, each value an ancestor-or-self of the original value",
        f"{len(bad)} of {len(known)} trajectories do not embed", not bad,
        {"patients": bad[:_SHOW]}))
    reqs.append(_declared(meta, trees, original, losses))
    return VerificationReport(algorithm, reqs)


def _k_anonymity(records: list[tuple[str, list[Pair]]], k: int) -> Requirement:
    groups = Counter(json.dumps(traj) for _, traj in records)
    small = sorted((n, t) for t, n in groups.items() if n < k)
    size, traj = min((n, t) for t, n in groups.items()) if groups else (0, "[]")
    shown = traj if len(traj) <= 200 else traj[:200] + "…"
    return Requirement(
        "k-anonymity", f"every published trajectory is shared by ≥ {k} records",
        f"smallest group {size} records, trajectory {shown}; {len(small)} groups below {k}",
        bool(groups) and not small,
        {"groups": len(groups), "small_groups": [{"size": n, "trajectory": t[:200]}
                                                 for n, t in small[:_SHOW]]})


def _declared(meta: Mapping[str, Any], trees: _Trees, original: Mapping[str, Original],
              losses: Mapping[str, tuple[int, int] | None]) -> Requirement:
    """Recomputed ILM/ALM (thesis Def. 8) and the settings against what the release states."""
    s = trees.s
    settings = (("k", s.k), ("w_icd", s.w_icd), ("w_age", s.w_age),
                ("leaf_count", s.leaf_count), ("age_domain", [s.age_first, trees.age_last]))
    wrong = {key: meta[key] for key, want in settings if key in meta and meta[key] != want}
    required = ("declared k, weights, leaf convention, age domain, ILM and ALM equal the "
                "verified settings and the recomputed loss")
    if any(v is None for v in losses.values()):
        return Requirement("declared loss", required, "not recomputable: some trajectories do "
                           "not embed", False, {"settings_differ": wrong})
    ilm = alm = 0.0
    counted = 0
    for pid, loss in losses.items():
        length = len(original[pid])
        if length and loss is not None:
            ilm += loss[0] / trees.icd_size / length
            alm += loss[1] / trees.age_size / length
            counted += 1
    ilm, alm = (ilm / counted, alm / counted) if counted else (0.0, 0.0)
    off = {key: meta[key] for key, value in (("ilm", ilm), ("alm", alm))
           if key in meta and (not isinstance(meta[key], int | float)
                               or abs(meta[key] - value) > LOSS_TOLERANCE)}
    declared = ", ".join(f"{key} {meta[key]}" for key in ("ilm", "alm") if key in meta)
    return Requirement("declared loss", required,
                       f"recomputed ILM {ilm:.6f}, ALM {alm:.6f}; declared "
                       f"{declared or 'nothing'}", not wrong and not off,
                       {"ilm": ilm, "alm": alm, "settings_differ": wrong, "loss_differs": off})


def verify(files: Mapping[str, bytes], original: Dataset, params: Mapping[str, Any], *,
           algorithm: str = NAME) -> VerificationReport:
    """The entry point every family shares: ``files`` against the original trajectories,
    for the run's k, weights and leaf convention on the thesis' age hierarchy (1–128,
    :class:`LdaSettings`' defaults) and the shipped ICD-9-CM hierarchy. ``algorithm`` names
    the registered variant (``lda``, ``lda-baseline``) the report is for."""
    from ehr_release.hierarchy import icd9_hierarchy

    settings = LdaSettings(int(params["k"]), float(params["w_icd"]), float(params["w_age"]),
                           int(params["leaf_count"]))
    return check_trajectories(files, original.patient_ids, original.trajectories(),
                              icd9_hierarchy(), settings, algorithm=algorithm)
