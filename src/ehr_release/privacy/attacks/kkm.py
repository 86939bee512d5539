"""The (k, k^m) adversary on a published ``records.parquet`` + ``generalized_codes.parquet``
(artuc, artuc-baseline, artuc-unconstrained, rmr).

The attacker knows all configured demographics of a target and up to m of the target's
diagnosis codes, and holds the release. A published line is a *candidate* when nothing in
it contradicts that knowledge:

* every generalized demographic covers the target's value (``[low, high]`` holds it, a
  hierarchy node is the value or one of its ancestors);
* every known code is shown by the line — unless the line's cluster shows that code on none
  of its lines, in which case the code was suppressed there (or never present) and no line
  of that cluster is ruled out by it. The cluster label is used exactly so: it tells the
  attacker which lines share a generalization;
* every field this audit does not know how to read (an undeclared column of the records
  table) is assumed to be predictable by the attacker: candidates must agree with the
  target's line on it. So must the line's position when the lines are not in the documented
  content order (each cluster's rows sorted by their ids, each cluster's rows together),
  since an order taken from the input could follow a value the attacker knows;
* any undeclared file is read as lines of tokens, and code-table entries no record shows as
  one line each: a line is a candidate when it mentions every known code (a stray list of
  code sets narrows a patient by itself). An id outside the code table fails the audit.

Knowing more codes can only remove candidates, so for a patient with n codes only the sets of
min(m, n) codes are tried (every smaller set is implied). Exhaustive over patients × sets
when that is at most :data:`EXHAUSTIVE_LIMIT` sets; otherwise a seeded sample of at least
:data:`MIN_SAMPLED` sets plus every set holding a rare code (fewer than k patients in the
original have it). Counting is vectorized: per cluster, the support of every combination of
≤ m generalized codes is tabulated once, and every (set, covering cluster) pair is one lookup.

Reads only the published bytes, the original extract and the configuration (attributes and
hierarchies): nothing from ``ehr_release.algorithms`` or from the model verifier.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from math import comb
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ehr_release.configuration.constraints import NumericalAttribute, RTConfig, load_config
from ehr_release.model.dataset import Dataset
from ehr_release.model.reports import AttackReport, candidate_set_distribution
from ehr_release.privacy.attacks import EXHAUSTIVE_LIMIT, MIN_SAMPLED
from ehr_release.privacy.kkm_inputs import read_original

RECORDS_FILE = "records.parquet"
CODES_FILE = "generalized_codes.parquet"
IDS_COLUMN = "generalized_codes"
#: Seed of the knowledge-set sample: fixed, so an audit is reproducible.
SEED = 14


@dataclass
class _Release:
    """The release as the attacker reads it: clusters ("units": one label, one generalized
    demographics), their lines' generalized codes, and each line's unknown-field label."""

    unit_demo: list[tuple[Hashable, ...]] = field(default_factory=list)
    line_unit: list[int] = field(default_factory=list)
    line_items: list[list[tuple[str, ...]]] = field(default_factory=list)
    line_label: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Code-table entries no row shows: read like a stray file of code sets.
    unused: list[tuple[str, ...]] = field(default_factory=list)


# --------------------------------------------------------------------------- reading the bytes
def _parquet(data: bytes) -> pa.Table:
    try:
        return pq.read_table(io.BytesIO(data))
    except Exception:  # noqa: BLE001 - the message could quote the bytes
        raise ValueError("a release table is not readable Parquet") from None


def _flat_lists(column: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Offsets (from 0) and flat values of a list column."""
    array = column.combine_chunks()
    if not pa.types.is_list(array.type) or array.null_count:
        raise ValueError("a list column holds something else")
    first, last = array.offsets[0].as_py(), array.offsets[-1].as_py()
    offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64) - first
    return offsets, array.values.slice(first, last - first)


def _code_table(data: bytes) -> list[tuple[str, ...]]:
    """Generalized codes by id (ids must be 0, 1, … in row order)."""
    table = _parquet(data)
    if "id" not in table.column_names or "codes" not in table.column_names:
        raise ValueError("the code table has no id or codes column")
    ids = table.column("id").to_numpy()
    if not np.array_equal(ids, np.arange(table.num_rows)):
        raise ValueError("code table ids are not 0, 1, … in row order")
    offsets, values = _flat_lists(table.column("codes"))
    flat = values.to_pylist()
    out = []
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        g = flat[a:b]
        if not g or not all(isinstance(c, str) for c in g):
            raise ValueError("a generalized code is not a list of code strings")
        out.append(tuple(sorted(set(g))))
    return out


def _demographics(table: pa.Table, config: RTConfig) -> list[tuple[Hashable, ...]]:
    """Each row's generalized demographics in configuration order."""
    columns: list[list[Hashable]] = []
    for attr in config.attributes:
        if attr.name not in table.column_names:
            raise ValueError("a configured demographic is not a column")
        column = table.column(attr.name)
        if isinstance(attr, NumericalAttribute):
            offsets, values = _flat_lists(column)
            if not np.all(np.diff(offsets) == 2) or not (
                    pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
                raise ValueError("a numerical demographic is not [low, high]")
            bounds = values.to_numpy(zero_copy_only=False).astype(float)
            columns.append(list(zip(bounds[0::2].tolist(), bounds[1::2].tolist(),
                                    strict=True)))
        else:
            if not pa.types.is_string(column.type):
                raise ValueError("a categorical demographic is not a node name")
            columns.append(column.to_pylist())
    return list(zip(*columns, strict=True)) if columns else [()] * table.num_rows


def read_release(files: Mapping[str, bytes], config: RTConfig) -> _Release:
    """Read both tables; raises ValueError (naming no value) when they cannot be read.

    Identical rows share one list of generalized codes. Every column this audit does not
    know becomes part of the row's label; code-table entries no row shows are kept as
    ``rel.unused`` (the audit reads them like a stray file).
    """
    rel = _Release()
    if RECORDS_FILE not in files:
        return rel
    table = _parquet(files[RECORDS_FILE])
    entries = _code_table(files.get(CODES_FILE, b""))
    if "cluster" not in table.column_names or IDS_COLUMN not in table.column_names:
        raise ValueError("the records table has no cluster or generalized_codes column")
    offsets, values = _flat_lists(table.column(IDS_COLUMN))
    ids = values.to_numpy(zero_copy_only=False).astype(np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= len(entries)):
        raise ValueError("a record refers to an id the code table does not hold")
    shown = np.bincount(ids, minlength=len(entries)) > 0
    rel.unused = [entries[i] for i in np.flatnonzero(~shown).tolist()]
    known = {"cluster", IDS_COLUMN, *config.names}
    extra = [c for c in table.column_names if c not in known]
    extra_values = [table.column(c).to_pylist() for c in extra]
    labels = [x if isinstance(x, str) else json.dumps(x)
              for x in table.column("cluster").to_pylist()]
    demos = _demographics(table, config)
    units: dict[tuple[str, tuple[Hashable, ...]], int] = {}
    items_of: dict[bytes, list[tuple[str, ...]]] = {}
    keys: list[tuple[int, ...]] = []
    for row, (label, demo) in enumerate(zip(labels, demos, strict=True)):
        unit = units.setdefault((label, demo), len(units))
        if unit == len(rel.unit_demo):
            rel.unit_demo.append(demo)
        own = ids[offsets[row]:offsets[row + 1]]
        items = items_of.get(own.tobytes())
        if items is None:
            items = items_of[own.tobytes()] = [entries[i] for i in own.tolist()]
        rel.line_unit.append(unit)
        rel.line_items.append(items)
        keys.append(tuple(own.tolist()))
        rel.line_label.append(json.dumps({c: str(v[row]) for c, v in
                                          zip(extra, extra_values, strict=True)},
                                         sort_keys=True) if extra else "")
    if extra:
        rel.notes.append("undeclared fields were treated as labels the attacker can predict")
    if not _in_content_order(keys, rel.line_unit):
        rel.notes.append("lines are not in content order: a line's position was treated as a "
                         "label the attacker can predict")
        rel.line_label = [f"{lab}#{i}" for i, lab in enumerate(rel.line_label)]
    return rel


def _in_content_order(keys: list[tuple[int, ...]], units: list[int]) -> bool:
    """Each cluster's rows together and sorted by their ids: the position says no more."""
    seen: set[int] = set()
    for i, unit in enumerate(units):
        if i and units[i - 1] == unit:
            if keys[i - 1] > keys[i]:
                return False
        elif unit in seen:
            return False
        seen.add(unit)
    return True


# --------------------------------------------------------------------------- knowledge sets
@dataclass(frozen=True)
class _Knowledge:
    """Knowledge sets: ``patient[i]`` knows codes ``codes[i]`` (code ids, −1 = none)."""

    patient: np.ndarray
    codes: np.ndarray
    exhaustive: bool


def _padded(sets: np.ndarray, m: int) -> np.ndarray:
    out = np.full((len(sets), m), -1, dtype=np.int64)
    out[:, :sets.shape[1]] = sets
    return out


def _all_sets(patients: list[int], rows: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Every min(m, n)-subset of each row (all rows of one length n)."""
    n = rows.shape[1]
    combos = list(itertools.combinations(range(n), min(m, n)))
    idx = np.array(combos, dtype=np.int64).reshape(len(combos), min(m, n))
    sets = rows[:, idx].reshape(len(rows) * len(idx), min(m, n))
    return np.repeat(np.array(patients, dtype=np.int64), len(idx)), _padded(sets, m)


def _rare_sets(codes: list[list[int]], m: int, rare: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """Every maximal set holding at least one rare code (so every set of rare codes only)."""
    pats: list[int] = []
    sets: list[tuple[int, ...]] = []
    for p, c in enumerate(codes):
        rare_here = [x for x in c if x in rare]
        s = min(m, len(c))
        found = {tuple(sorted((r, *rest))) for r in rare_here
                 for rest in itertools.combinations([x for x in c if x != r], s - 1)}
        pats.extend([p] * len(found))
        sets.extend(sorted(found))
    padded = np.full((len(sets), m), -1, dtype=np.int64)
    for i, row in enumerate(sets):
        padded[i, :len(row)] = row
    return np.array(pats, dtype=np.int64), padded


def _sample(codes: list[list[int]], m: int, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray]:
    """≥ MIN_SAMPLED distinct sets drawn uniformly: a patient in proportion to its sets."""
    weights = np.array([comb(len(c), min(m, len(c))) for c in codes], dtype=float)
    found = np.empty((0, m + 1), dtype=np.int64)
    while len(found) < MIN_SAMPLED:
        picks = rng.choice(len(codes), MIN_SAMPLED, p=weights / weights.sum())
        lengths = np.array([len(codes[p]) for p in picks.tolist()])
        blocks = [found]
        for n in np.unique(lengths).tolist():
            ps = picks[lengths == n]
            rows = np.array([codes[p] for p in ps.tolist()], dtype=np.int64).reshape(len(ps), n)
            order = np.argsort(rng.random(rows.shape), axis=1)[:, :min(m, n)]
            sets = np.sort(np.take_along_axis(rows, order, axis=1), axis=1)
            blocks.append(np.column_stack([ps, _padded(sets, m)]))
        found = np.unique(np.concatenate(blocks), axis=0)
    return found[:, 0], found[:, 1:]


def knowledge_sets(codes: list[list[int]], m: int, rare: set[int]) -> _Knowledge:
    """Every maximal set when few enough; otherwise the seeded sample plus every rare set."""
    total = sum(comb(len(c), min(m, len(c))) for c in codes)
    if total <= EXHAUSTIVE_LIMIT:
        by_n: dict[int, list[int]] = {}
        for p, c in enumerate(codes):
            by_n.setdefault(len(c), []).append(p)
        parts = [_all_sets(ps, np.array([codes[p] for p in ps], dtype=np.int64)
                           .reshape(len(ps), n), m) for n, ps in by_n.items()]
        if not parts:
            return _Knowledge(np.empty(0, np.int64), np.empty((0, m), np.int64), True)
        return _Knowledge(np.concatenate([p for p, _ in parts]),
                          np.concatenate([c for _, c in parts]), True)
    sampled = _sample(codes, m, np.random.default_rng(SEED))
    rare_p, rare_c = _rare_sets(codes, m, rare)
    both = np.unique(np.column_stack([np.r_[sampled[0], rare_p],
                                      np.r_[sampled[1], rare_c]]), axis=0)
    return _Knowledge(both[:, 0], both[:, 1:], False)


# --------------------------------------------------------------------------- coverage
def _covering(rel: _Release, config: RTConfig, values: np.ndarray
              ) -> list[np.ndarray]:
    """Per unit, the indices of the distinct patient demographic tuples it covers."""
    cache: dict[tuple[int, Hashable], np.ndarray] = {}
    out = []
    for demo in rel.unit_demo:
        mask = np.ones(len(values), dtype=bool)
        for a, (attr, v) in enumerate(zip(config.attributes, demo, strict=True)):
            col = values[:, a]
            if isinstance(attr, NumericalAttribute):
                lo, hi = v
                num = col.astype(float)
                mask &= (num >= lo) & (num <= hi)
            else:
                if (a, v) not in cache:
                    h = attr.hierarchy
                    cache[(a, v)] = np.array([x == v or v in set(h.ancestors(x))
                                              for x in col.tolist()], dtype=bool)
                mask &= cache[(a, v)]
        out.append(np.flatnonzero(mask))
    return out


# --------------------------------------------------------------------------- counting
def _key(items: np.ndarray, width: int) -> np.ndarray:
    """Canonical int key of rows of item ids (0 = none): distinct ids, descending, base W."""
    if items.shape[1] == 1:
        return items[:, 0].copy()
    if items.shape[1] == 2:  # the usual m = 2, without sorting rows
        high = np.maximum(items[:, 0], items[:, 1])
        low = np.minimum(items[:, 0], items[:, 1])
        return high * width + np.where(low == high, 0, low)
    rows = -np.sort(-items, axis=1)
    rows[:, 1:][rows[:, 1:] == rows[:, :-1]] = 0
    rows = -np.sort(-rows, axis=1)
    key = np.zeros(len(rows), dtype=np.int64)
    for j in range(rows.shape[1]):
        key = key * width + rows[:, j]
    return key


@dataclass(frozen=True)
class _Supports:
    """How many lines of each label show each combination of ≤ m generalized codes.

    Generalized codes are numbered per unit (1, 2, …); a combination is keyed as in
    :func:`_key`, and the empty combination of unit u as ``width − 1 − u`` (no real key is
    in that range). ``vocab`` maps ``unit · n_codes + code`` to the generalized code showing
    it in that unit; ``entries`` holds ``key · labels + label`` sorted, ``count`` its lines.
    """

    width: int
    n_codes: int
    labels: int
    vocab_keys: np.ndarray
    vocab_items: np.ndarray
    entries: np.ndarray
    count: np.ndarray


def _supports(rel: _Release, code_id: dict[str, int], m: int) -> _Supports:
    item_id: dict[tuple[int, tuple[str, ...]], int] = {}
    vocab: dict[int, int] = {}
    n_codes = len(code_id) + 1
    lines: dict[tuple[int, tuple[int, ...], str], int] = {}  # identical lines counted once
    # Identical lines share one parsed list (read_release): walk each distinct one once.
    same: dict[tuple[int, int, str], tuple[list[tuple[str, ...]], int]] = {}
    for unit, items, lab in zip(rel.line_unit, rel.line_items, rel.line_label, strict=True):
        seen = same.get((unit, id(items), lab))
        same[(unit, id(items), lab)] = (items, seen[1] + 1 if seen else 1)
    for (unit, _, lab), (items, times) in same.items():
        ids = []
        for g in items:
            item = item_id.get((unit, g))
            if item is None:
                item = item_id[(unit, g)] = len(item_id) + 1
                for c in g:
                    if vocab.setdefault(unit * n_codes + code_id[c], item) != item:
                        raise ValueError("a cluster shows one code in two generalized codes")
            ids.append(item)
        key = (unit, tuple(sorted(set(ids), reverse=True)), lab)
        lines[key] = lines.get(key, 0) + times
    width = len(item_id) + len(rel.unit_demo) + 1
    if width ** m >= 2 ** 62:
        raise ValueError("too many generalized codes to key combinations of m of them")
    labels = {lab: i for i, lab in enumerate(dict.fromkeys(rel.line_label))}
    keys: list[int] = []
    weights: list[int] = []
    for (unit, ids, lab), times in lines.items():
        own = [width - 1 - unit]
        for s in range(1, min(m, len(ids)) + 1):
            for combo in itertools.combinations(ids, s):  # descending, as in _key
                key = 0
                for x in combo + (0,) * (m - s):
                    key = key * width + x
                own.append(key)
        keys.extend(k * len(labels) + labels[lab] for k in own)
        weights.extend([times] * len(own))
    entries, inverse = np.unique(np.array(keys, dtype=np.int64), return_inverse=True)
    count = np.bincount(inverse, weights=np.array(weights, dtype=np.int64))
    vocab_keys = np.array(sorted(vocab), dtype=np.int64)
    vocab_items = np.array([vocab[x] for x in vocab_keys.tolist()], dtype=np.int64)
    return _Supports(width, n_codes, len(labels), vocab_keys, vocab_items, entries,
                     count.astype(np.int64))


def _pairs(know: _Knowledge, group_of: np.ndarray, n_groups: int,
           covering: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(knowledge set, unit) for every unit covering the set's patient."""
    groups = group_of[know.patient]
    order = np.argsort(groups, kind="stable")
    starts = np.searchsorted(groups[order], np.arange(n_groups + 1))
    q_all, u_all = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    for unit, covered in enumerate(covering):
        picked = [order[starts[g]:starts[g + 1]] for g in covered.tolist()]
        if picked:
            qs = np.concatenate(picked)
            q_all.append(qs)
            u_all.append(np.full(len(qs), unit, dtype=np.int64))
    return np.concatenate(q_all), np.concatenate(u_all)


def _unit_items(sup: _Supports, unit: int) -> np.ndarray:
    """code id (the last: none) → the unit's generalized code showing it, 0 if none."""
    lo, hi = np.searchsorted(sup.vocab_keys, [unit * sup.n_codes, (unit + 1) * sup.n_codes])
    table = np.zeros(sup.n_codes, dtype=np.int64)
    table[sup.vocab_keys[lo:hi] - unit * sup.n_codes] = sup.vocab_items[lo:hi]
    return table


def _sizes_one_label(sup: _Supports, know: _Knowledge, group_of: np.ndarray, n_groups: int,
                     covering: list[np.ndarray]) -> np.ndarray:
    """Candidate-set sizes when every line has the same (empty) label: the common case.

    Knowledge sets are sorted by their patient's demographic group, so a unit adds its
    supports to the slices of the groups it covers, looking codes up in a table of its own
    (small enough to stay in cache).
    """
    groups = group_of[know.patient]
    order = np.argsort(groups, kind="stable")
    codes = np.where(know.codes >= 0, know.codes, sup.n_codes - 1)[order]
    starts = np.searchsorted(groups[order], np.arange(n_groups + 1))
    sizes = np.zeros(len(order), dtype=np.int64)
    for unit, covered in enumerate(covering):
        if not len(covered):
            continue
        lengths = starts[covered + 1] - starts[covered]
        if not lengths.sum():
            continue
        # the covered groups' slices as one index (distinct positions: += is safe)
        part = np.repeat(starts[covered] - np.cumsum(lengths) + lengths, lengths) \
            + np.arange(int(lengths.sum()))
        key = _key(_unit_items(sup, unit)[codes[part]], sup.width)
        key[key == 0] = sup.width - 1 - unit
        at = np.minimum(np.searchsorted(sup.entries, key), len(sup.entries) - 1)
        sizes[part] += np.where(sup.entries[at] == key, sup.count[at], 0)
    return sizes[sizes > 0]


def _candidate_sizes(sup: _Supports, know: _Knowledge, q: np.ndarray,
                     u: np.ndarray) -> np.ndarray:
    """Size of every non-empty candidate set, one per (knowledge set, label)."""
    codes = know.codes[q]
    look = u[:, None] * sup.n_codes + np.where(codes >= 0, codes, sup.n_codes - 1)
    items = np.zeros_like(codes)
    if len(sup.vocab_keys):
        at = np.minimum(np.searchsorted(sup.vocab_keys, look), len(sup.vocab_keys) - 1)
        items = np.where(sup.vocab_keys[at] == look, sup.vocab_items[at], 0)
    key = _key(items, sup.width)
    key = np.where(key == 0, sup.width - 1 - u, key)
    by_key = sup.entries // sup.labels
    lo = np.searchsorted(by_key, key, side="left")
    span = np.searchsorted(by_key, key, side="right") - lo
    rows = np.repeat(np.arange(len(q)), span)
    pos = np.arange(int(span.sum())) - np.repeat(np.cumsum(span) - span, span) \
        + np.repeat(lo, span)
    combined = q[rows] * sup.labels + sup.entries[pos] % sup.labels
    if not len(combined):
        return np.empty(0, dtype=np.int64)
    _, inverse = np.unique(combined, return_inverse=True)
    return np.bincount(inverse, weights=sup.count[pos]).astype(np.int64)


def _stray_files(files: Mapping[str, bytes], know: _Knowledge, names: list[str],
                 unused: list[tuple[str, ...]]) -> int | None:
    """Smallest non-zero count of lines of an undeclared file (or of unused code-table
    entries) mentioning every known code."""
    smallest: int | None = None
    sources = [[set(g) for g in unused]] if unused else []
    for name, data in files.items():
        if name in (RECORDS_FILE, CODES_FILE):
            continue
        sources.append([set(line.replace(",", " ").replace('"', " ").replace("[", " ")
                            .replace("]", " ").replace("{", " ").replace("}", " ")
                            .replace(":", " ").split())
                        for line in data.decode("utf-8", "replace").split("\n")
                        if line.strip()])
    for lines in sources:
        holders: dict[str, set[int]] = {}
        for i, tokens in enumerate(lines):
            for t in tokens:
                holders.setdefault(t, set()).add(i)
        for row in {tuple(r) for r in know.codes.tolist()}:
            known = [names[c] for c in row if c >= 0]
            if not known:
                continue
            hit = set.intersection(*(holders.get(c, set()) for c in known))
            if hit and (smallest is None or len(hit) < smallest):
                smallest = len(hit)
    return smallest


# --------------------------------------------------------------------------- entry points
def attack_kkm(files: Mapping[str, bytes], original: Dataset, config: RTConfig, *, k: int,
               m: int) -> AttackReport:
    """The (k, k^m) adversary on ``files`` (see the module docstring)."""
    model = (f"an attacker who knows all {len(config.attributes)} released demographics and "
             f"up to {m} diagnosis codes of a patient and reads every published field")
    data = read_original(original, config)
    rel = read_release(files, config)
    shown = {g for items in {id(x): x for x in rel.line_items}.values() for g in items}
    names = sorted({c for cs in data.codes for c in cs} | {c for g in shown for c in g})
    code_id = {c: i for i, c in enumerate(names)}
    patient_codes = [sorted(code_id[c] for c in cs) for cs in data.codes]
    support: dict[int, int] = {}
    for cs in patient_codes:
        for c in cs:
            support[c] = support.get(c, 0) + 1
    know = knowledge_sets(patient_codes, m, {c for c, n in support.items() if n < k})
    values = data.demographics[config.names].to_numpy(dtype=object)
    group_of = np.zeros(len(values), dtype=np.int64)
    first = np.zeros(0, dtype=np.int64)
    if len(values):  # patients with identical demographics: one coverage test
        _, first, group_of = np.unique(values.astype(str), axis=0, return_index=True,
                                       return_inverse=True)
    group_of = np.ravel(group_of).astype(np.int64)
    covering = _covering(rel, config, values[first])
    sup = _supports(rel, code_id, m)
    if sup.labels == 1:
        sizes = _sizes_one_label(sup, know, group_of, len(first), covering)
    else:
        sizes = _candidate_sizes(sup, know, *_pairs(know, group_of, len(first), covering))
    smallest = int(sizes.min()) if len(sizes) else None
    stray = _stray_files(files, know, names, rel.unused)
    notes = list(rel.notes)
    if stray is not None:
        notes.append("undeclared files and unused code-table entries were read as lines of "
                     "codes")
        smallest = stray if smallest is None else min(smallest, stray)
    tried = len(know.patient)
    passed = smallest is None or smallest >= k
    measured = ""
    if notes:
        shown = f"{smallest:,}" if smallest is not None else "none"
        measured = (f"smallest candidate set {shown} over {tried:,} knowledge sets "
                    f"({'every one' if know.exhaustive else 'seeded sample plus every rare set'}"
                    f"); " + "; ".join(notes))
    return AttackReport(attacker_model=model, knowledge_sets_tried=tried,
                        exhaustive=know.exhaustive, smallest_candidate_set=smallest,
                        threshold=k, passed=passed, measured=measured,
                        candidate_set_sizes=candidate_set_distribution(sizes))


def attack(files: dict[str, bytes], original: Dataset, params: dict[str, Any]) -> AttackReport:
    """Registry entry point: the configuration named by ``params`` (the attack needs only its
    attributes and hierarchies; constraint overrides do not change them)."""
    config = load_config(params["config"], params.get("constraints") or None)
    return attack_kkm(files, original, config, k=int(params["k"]), m=int(params["m"]))
