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
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from ehr_release.hierarchy import Hierarchy
from ehr_release.privacy.closed_world import ListOf, Obj, TupleOf
from ehr_release.privacy.json_columns import all_conform, forget, loads_lines
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
_INF = 2 ** 62  # an unreachable cell of the embedding table
_BATCH = 4096  # (original, published) pairs per vectorized table
LOSS_TOLERANCE = 1e-9  # the algorithm sums floats; this side sums exact integers
_SHOW = 10  # how many offending patients a requirement's evidence names

Pair = tuple[str, tuple[int, int]]  # published: (ICD node, (first age, last age))
Original = Sequence[tuple[str, int]]
_LINE = Obj({"patient_id": "str", "trajectory": ListOf(TupleOf(("str", TupleOf(("int", "int")))))})


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
    """The records column-wise when every line is plainly in shape and every pair valid,
    else line by line, which names the first departure (the verdict is the per-line
    reader's either way: the fast pass only ever refuses more, and then defers)."""
    fast = _columns(files, trees)
    if fast is not None:
        return fast, release_meta(files, META_FILE)
    return _lines(files, trees)


def _columns(files: Mapping[str, bytes], trees: _Trees) -> list[tuple[str, list[Pair]]] | None:
    if RECORDS_FILE not in files or META_FILE not in files:
        return None
    objects = loads_lines(files[RECORDS_FILE])
    forget()  # the closed world's parse, kept for this reader
    if objects is None or not all_conform(objects, _LINE):
        return None
    records = [(obj["patient_id"], [(code, (lo, hi)) for code, (lo, hi) in obj["trajectory"]])
               for obj in objects]
    pairs = set(chain.from_iterable(traj for _, traj in records))
    if not all(code in trees.h and trees.is_block(lo, hi) for code, (lo, hi) in pairs):
        return None
    return records


def _lines(files: Mapping[str, bytes], trees: _Trees) -> tuple[list[tuple[str, list[Pair]]],
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
        raise MalformedRelease(f"line {no}: every pair must look like [\"ICD\", [first, last]]")
    code, (lo, hi) = item
    if code not in trees.h:
        raise MalformedRelease(f"line {no}: a code is not a node of the ICD hierarchy")
    if not trees.is_block(lo, hi):
        raise MalformedRelease(f"line {no}: an age range is not a block of the age hierarchy "
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


def embeddings(trees: _Trees, jobs: Sequence[tuple[Original, Sequence[Pair]]]
               ) -> list[tuple[int, int] | None]:
    """:func:`cheapest_embedding` of every (original, published) pair, the same table
    filled for many pairs at once with NumPy: one step per original position, vectorized
    over pairs and published positions; pairs of similar length share a batch. Weights
    whose costs could leave 64-bit integers are left to :func:`cheapest_embedding`."""
    root_i, root_a = trees.icd_l(trees.h.root), trees.age_size
    longest = max((len(o) for o, _ in jobs), default=0)
    if (trees.wi * (root_i + 1) + trees.wa * (root_a + 1)) * (longest + 1) >= _INF // 4:
        return [cheapest_embedding(trees, o, p) for o, p in jobs]
    out: list[tuple[int, int] | None] = [None] * len(jobs)
    order = sorted(range(len(jobs)), key=lambda i: (len(jobs[i][0]), len(jobs[i][1])))
    for start in range(0, len(order), _BATCH):
        chunk = order[start:start + _BATCH]
        for i, loss in zip(chunk, _embed_batch(trees, [jobs[i] for i in chunk]), strict=True):
            out[i] = loss
    return out


def _cells(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of every item of rows of these lengths, laid out left-aligned."""
    row = np.repeat(np.arange(len(lengths)), lengths)
    return row, np.arange(len(row)) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _embed_batch(trees: _Trees, jobs: Sequence[tuple[Original, Sequence[Pair]]]
                 ) -> list[tuple[int, int] | None]:
    root_i, root_a, leaf = trees.icd_l(trees.h.root), trees.age_size, trees.s.leaf_count
    p = len(jobs)
    n = np.array([len(o) for o, _ in jobs], dtype=np.int64)
    m = np.array([len(q) for _, q in jobs], dtype=np.int64)
    width_n, width_m = int(n.max(initial=0)), int(m.max(initial=0))
    code_id: dict[str, int] = {}
    node_id: dict[str, int] = {}
    originals = list(chain.from_iterable(o for o, _ in jobs))
    published = list(chain.from_iterable(q for _, q in jobs))
    codes = np.zeros((p, max(width_n, 1)), dtype=np.int64)
    ages = np.zeros((p, max(width_n, 1)), dtype=np.int64)
    row, col = _cells(n)
    codes[row, col] = [code_id.setdefault(c, len(code_id)) for c, _ in originals]
    ages[row, col] = [a for _, a in originals]
    nodes = np.zeros((p, width_m), dtype=np.int64)
    lo = np.ones((p, width_m), dtype=np.int64)
    hi = np.zeros((p, width_m), dtype=np.int64)  # lo > hi: a padding pair covers nothing
    row, col = _cells(m)
    nodes[row, col] = [node_id.setdefault(v, len(node_id)) for v, _ in published]
    lo[row, col] = [a for _, (a, _) in published]
    hi[row, col] = [b for _, (_, b) in published]
    oi = np.array([trees.icd_l(c) for c in code_id] or [0], dtype=np.int64)
    ln = np.array([trees.icd_l(v) for v in node_id] or [0], dtype=np.int64)
    covers = np.zeros((max(len(code_id), 1), max(len(node_id), 1)), dtype=bool)
    for code, c in code_id.items():  # ancestor-or-self, walked on the parent links
        for node in (code, *trees.h.ancestors(code)):
            if node in node_id:
                covers[c, node_id[node]] = True
    la = np.where(hi == lo, leaf, hi - lo + 1) - leaf  # age loss added by a match
    ln_pub = ln[nodes]
    cost = np.full((p, width_m + 1), _INF, dtype=np.int64)
    d_i = np.zeros_like(cost)
    d_a = np.zeros_like(cost)
    cost[:, 0] = 0
    for h in range(width_n):
        live = (h < n)[:, None]
        o_i, age = oi[codes[:, h]][:, None], ages[:, h][:, None]
        ok1 = cost < _INF  # suppress the original pair: charged up to both roots
        i1, a1 = d_i + (root_i - o_i), d_a + (root_a - leaf)
        c1 = np.where(ok1, trees.wi * i1 + trees.wa * a1, _INF)
        match = covers[codes[:, h][:, None], nodes] & (lo <= age) & (age <= hi)
        ok2 = match & ok1[:, :-1]  # ...or be the image of published pair j
        i2, a2 = d_i[:, :-1] + ln_pub - o_i, d_a[:, :-1] + la
        c2 = np.where(ok2, trees.wi * i2 + trees.wa * a2, _INF)
        take2 = ok2 & ((c2 < c1[:, 1:]) | (c2 == c1[:, 1:]) & (
            (i2 < i1[:, 1:]) | (i2 == i1[:, 1:]) & (a2 < a1[:, 1:])))
        new_c, new_i, new_a = c1, i1, a1
        new_c[:, 1:] = np.where(take2, c2, c1[:, 1:])
        new_i[:, 1:] = np.where(take2, i2, i1[:, 1:])
        new_a[:, 1:] = np.where(take2, a2, a1[:, 1:])
        cost = np.where(live, new_c, cost)
        d_i = np.where(live, new_i, d_i)
        d_a = np.where(live, new_a, d_a)
    rows = np.arange(p)
    final = cost[rows, m] < _INF
    return [(int(i), int(a)) if ok else None for ok, i, a in zip(
        final.tolist(), d_i[rows, m].tolist(), d_a[rows, m].tolist(), strict=True)]


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
    memo: dict[tuple, int] = {}  # identical (original, published) pairs: one table
    which = [memo.setdefault((tuple(original[pid]), tuple(traj)), len(memo))
             for pid, traj in known]
    found = embeddings(trees, list(memo))
    losses = {pid: found[w] for (pid, _), w in zip(known, which, strict=True)}
    bad = [pid for pid, loss in losses.items() if loss is None]
    reqs.append(Requirement(
        "truthful generalization", "every published trajectory embeds in order into its "
        "original, each value an ancestor-or-self of the original value",
        f"{len(bad)} of {len(known)} trajectories do not embed", not bad,
        {"patients": bad[:_SHOW]}))
    reqs.append(_declared(meta, trees, original, losses))
    return VerificationReport(algorithm, reqs)


def _k_anonymity(records: list[tuple[str, list[Pair]]], k: int) -> Requirement:
    by_pairs = Counter(tuple(traj) for _, traj in records)
    least = min(by_pairs.values(), default=0)
    # rendered only where shown or ordered: the small groups and the smallest
    groups = {json.dumps(list(t)): n for t, n in by_pairs.items() if n < k or n == least}
    small = sorted((n, t) for t, n in groups.items() if n < k)
    size, traj = min((n, t) for t, n in groups.items()) if groups else (0, "[]")
    shown = traj if len(traj) <= 200 else traj[:200] + "…"
    return Requirement(
        "k-anonymity", f"every published trajectory is shared by ≥ {k} records",
        f"smallest group {size} records, trajectory {shown}; {len(small)} groups below {k}",
        bool(groups) and not small,
        {"groups": len(by_pairs), "small_groups": [{"size": n, "trajectory": t[:200]}
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
