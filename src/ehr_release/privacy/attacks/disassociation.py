"""The k^m adversary against a disassociated release (``release.parquet``).

The attacker knows up to m codes S of a target and holds the whole release. Inside a cluster
P, the target's record is one of the subrecords of each chunk that hold the codes of S in
that chunk's domain, and (with codes of S only in the item chunk) one of the |P| records: the
attacker's candidate set is the smallest of these, ``cand_P(S) = min(|P|, sup_C(S ∩ T_C)
over every record or shared chunk C meeting S)``, and 0 when S does not fit P's domain or a
chunk never shows S ∩ T_C together.

What the attack assumes beyond the model, to use every published field:

* **The attacker knows the target's cluster.** Cluster ids, the order of clusters and of
  chunks, joint-cluster membership are the same for every record of a cluster; whatever they
  leak, it is at most the cluster. So the candidate set of S is the smallest positive
  ``cand_P(S)`` over the clusters S fits (not the sum over clusters, which the model's
  Guarantee 1 uses), and 0 if S fits none (the release does not hold the patient).
* **Positions may link chunks.** If subrecords at the same position of a cluster's chunks
  came from one record, the attacker reads records positionally and the candidate set of S
  is the number of positions of P holding S. The attack tests that reading with the
  original: under it, every position joining several chunks is an original record (plus
  item-chunk codes); no pair of codes shares more positions of a group than original records
  hold it; and each pair of codes meeting across chunks does so at exactly as many positions
  as original records hold it outside one subrecord, give or take the records where one of
  the two sits in an item chunk. A release whose order breaks none of these, while
  independent reshuffles of its chunks break them in ≥ :data:`EXPECTED_REFUTATIONS` groups
  on average, is read positionally: groups are shuffled independently, so independent
  shuffles would pass by luck with probability about e^-14 < 10^-6. Where the data give the
  test too little to go on (few groups with several chunks, codes that combine freely), the
  order is treated as independent shuffles and the report says how weak the evidence was.
* **Anything undeclared can single a record out.** An undeclared column, file metadata or
  column statistics, rows out of the declared order, a per-group value that differs between
  the group's rows, or a subrecord / item chunk whose codes are not in canonical (sorted,
  distinct) order can carry a per-record value the attacker cannot interpret: the attack
  assumes the worst (candidate set 1).

Knowledge sets: for m ≤ 2 every patient × every set of ≤ m of its codes (evaluated once per
distinct set, vectorized); for m > 2 the same when there are at most
:data:`~ehr_release.privacy.attacks.EXHAUSTIVE_LIMIT`, otherwise a seeded sample of
:data:`~ehr_release.privacy.attacks.MIN_SAMPLED` plus every set built only from rare codes.
Nothing in the report names a patient, a code or a cluster: counts only.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import combinations
from math import comb
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from ehr_release.dataset import CODE, PATIENT_ID, Dataset
from ehr_release.privacy.attacks import EXHAUSTIVE_LIMIT, MIN_SAMPLED
from ehr_release.reports import AttackReport, candidate_set_distribution

RELEASE_FILE = "release.parquet"
COLUMNS = ("k", "m", "group", "size", "joint", "chunk", "subrecord", "code")
STR_COLUMNS = ("group", "joint", "code")
#: Seed of the knowledge-set sample and of the reshuffles (the audit is deterministic).
SEED = 14
#: Reshuffles that test a positional reading against independent shuffles.
RESHUFFLES = 20
#: Mean number of refuted groups per reshuffle needed to read a release positionally.
EXPECTED_REFUTATIONS = 14.0
#: Largest key range counted in an array instead of by sorting (int64: 256 MB at most).
DENSE_KEYS = 1 << 25
#: Pair rows generated per vectorized batch (bounds memory at 1M records).
BATCH_PAIRS = 8_000_000
#: Record × code lookups the positional test spends, per reading, checking that positions
#: joining several chunks are held by some original record (beyond it, pair counts only).
SUBSET_BUDGET = 1_000_000


class _Unreadable(ValueError):
    """The bytes are not a disassociated release this attack can read (say why, no value)."""


class _Unbounded(ValueError):
    """A published detail the attacker cannot interpret: assumed to single a record out."""


# --------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class _Release:
    """The release over one integer code numbering (codes sorted, so ids order like names).

    Units are chunks: record chunks (owned by a cluster) and shared chunks (owned by a joint
    cluster). ``sub_*`` describe every subrecord: its unit, its position there and its codes
    (CSR). ``pos_of_sub`` is the record position a positional reading gives it.
    """

    names: list[str]
    n_codes: int
    size: np.ndarray            # per cluster
    joint_of: np.ndarray        # per cluster: joint index or -1
    items: list[np.ndarray]     # per cluster: item-chunk code ids
    unit_owner: np.ndarray      # per unit: cluster (record chunk) or joint (shared chunk)
    unit_shared: np.ndarray     # per unit: bool
    sub_unit: np.ndarray
    sub_pos: np.ndarray
    sub_indptr: np.ndarray
    sub_codes: np.ndarray
    base: np.ndarray            # per cluster: first global position
    joint_members: list[list[int]]


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise _Unreadable(what)


def _columns(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, list[str]]]]:
    """The table's integer columns, and each string column as per-row ids (-1 for null) into
    its distinct values; whatever the file holds beyond the declared columns is refused."""
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(io.BytesIO(data), read_dictionary=list(STR_COLUMNS))
        names = list(handle.schema_arrow.names)
        meta = handle.metadata
    except Exception:  # noqa: BLE001 - pyarrow raises its own hierarchy for corrupt files
        raise _Unreadable(f"{RELEASE_FILE} is not a readable Parquet file") from None
    if set(names) - set(COLUMNS):
        raise _Unbounded("the release holds an undeclared column")
    _require(names == list(COLUMNS), "the release lacks a declared column")
    if meta.metadata:
        raise _Unbounded("the release file carries key-value metadata")
    if any(meta.row_group(g).column(i).is_stats_set for g in range(meta.num_row_groups)
           for i in range(meta.num_columns)):
        raise _Unbounded("the release file carries column statistics")
    try:
        table = handle.read()
        ints = {n: table[n].to_numpy() for n in COLUMNS if n not in STR_COLUMNS}
    except Exception:  # noqa: BLE001 - nulls or a type pyarrow cannot turn into integers
        raise _Unreadable("an integer column is not integers without nulls") from None
    strs = {}
    for name in STR_COLUMNS:
        values: dict[str, int] = {}
        parts = []
        for chunk in table[name].chunks:
            _require(hasattr(chunk, "dictionary"), f"column {name} is not text")
            local = np.array([values.setdefault(str(x), len(values))
                              for x in chunk.dictionary.to_pylist()] + [-1], dtype=np.int64)
            parts.append(local[chunk.indices.fill_null(-1).to_numpy()])
        strs[name] = (np.concatenate(parts) if parts else np.zeros(0, np.int64), list(values))
    return ints, strs


def _changes(*keys: np.ndarray) -> np.ndarray:
    """True where a row differs from the previous one in some key (and at row 0)."""
    out = np.zeros(len(keys[0]), dtype=bool)
    if len(out):
        out[0] = True
        for key in keys:
            out[1:] |= key[1:] != key[:-1]
    return out


def read_release(data: bytes, original_codes: list[str]) -> _Release:
    """Read ``release.parquet`` and number its codes together with the original's."""
    ints, strs = _columns(data)
    _require(len(ints["k"]) > 0, "the release has no rows")
    gid, glabels = strs["group"]
    _require(bool((gid >= 0).all()), "a row has no group")
    new_group = _changes(gid)
    starts = np.flatnonzero(new_group)
    labels = [glabels[i] for i in gid[starts].tolist()]
    n_clusters = sum(1 for x in labels if x[:1] == "P")
    expected = [f"P{i}" for i in range(1, n_clusters + 1)] + \
        [f"J{i}" for i in range(1, len(labels) - n_clusters + 1)]
    _require(labels == expected, "groups are not P1, P2, … then J1, J2, …, one run each")
    group = np.cumsum(new_group) - 1
    chunk, pos, size_col = ints["chunk"], ints["subrecord"], ints["size"]
    jid, jlabels = strs["joint"]
    inside = ~new_group[1:]
    for col in (size_col, jid, ints["k"], ints["m"]):
        if (inside & (col[1:] != col[:-1])).any():
            raise _Unbounded("a value that is one per group differs between its rows")
    # the declared order: group, chunk, subrecord (consecutive from 0), then code
    new_chunk = new_group | _changes(chunk)
    new_sub = new_chunk | _changes(pos)
    c_at, s_at = np.flatnonzero(new_chunk), np.flatnonzero(new_sub)
    shared_row = group >= n_clusters
    first_chunk = np.where(shared_row[c_at], 1, 0)
    prev_chunk = np.r_[0, chunk[c_at[:-1]]] + 1
    prev_pos = np.r_[0, pos[s_at[:-1]]] + 1
    if not (np.where(new_group[c_at], chunk[c_at] == first_chunk, chunk[c_at] == prev_chunk)
            .all() and np.where(new_chunk[s_at], pos[s_at] == 0, pos[s_at] == prev_pos).all()
            and (pos[(chunk == 0)] == 0).all()):
        raise _Unbounded("the rows are not in the declared order")
    cid, cnames = strs["code"]
    names = sorted(set(cnames).union(original_codes))
    index = {name: i for i, name in enumerate(names)}
    code = np.r_[np.fromiter(map(index.__getitem__, cnames), dtype=np.int64,
                             count=len(cnames)), -1][cid]
    same_sub = ~new_sub[1:]
    if (same_sub & ((code[1:] <= code[:-1]) | (code[:-1] < 0))).any():
        raise _Unbounded("a subrecord lists its codes in a non-canonical order")
    # clusters, joint clusters and their members
    size = size_col[starts[:n_clusters]].astype(np.int64)
    number = {f"J{i}": i - 1 for i in range(1, len(labels) - n_clusters + 1)}
    named = [jlabels[i] if i >= 0 else None for i in jid[starts].tolist()]
    _require(all(x == labels[g] for g, x in enumerate(named) if g >= n_clusters),
             "a joint cluster does not name itself")
    joint_of = np.array([number.get(x, -2) if x is not None else -1
                         for x in named[:n_clusters]], dtype=np.int64).reshape(n_clusters)
    _require(bool((joint_of >= -1).all()), "a cluster names an unknown joint cluster")
    members = [np.flatnonzero(joint_of == j).tolist() for j in range(len(number))]
    joint_size = np.array([int(size[ps].sum()) for ps in members], dtype=np.int64)
    # units (record and shared chunks) and their subrecords; item chunks apart
    item = (chunk == 0) & ~shared_row
    rec = ~item
    unit_rows = c_at[rec[c_at]]
    unit_group = group[unit_rows]
    unit_shared = unit_group >= n_clusters
    unit_owner = np.where(unit_shared, unit_group - n_clusters, unit_group)
    sub_rows = s_at[rec[s_at]]
    sub_unit = (np.cumsum(new_chunk[rec]) - 1)[new_sub[rec]]
    unit_len = np.where(unit_shared, joint_size[np.where(unit_shared, unit_owner, 0)]
                        if len(joint_size) else 0, size[np.where(unit_shared, 0, unit_owner)])
    _require(bool((np.bincount(sub_unit, minlength=len(unit_rows)) == unit_len).all()),
             "a chunk does not list one subrecord per record")
    held = rec & (code >= 0)
    lengths = np.bincount(np.cumsum(new_sub[rec]) - 1, weights=(code >= 0)[rec],
                          minlength=len(sub_rows)).astype(np.int64)
    sub_indptr = np.zeros(len(sub_rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=sub_indptr[1:])
    item_rows = item & (code >= 0)
    n_items = np.bincount(group[item_rows], minlength=n_clusters)
    item_flat = code[item_rows]
    items = np.split(item_flat, np.cumsum(n_items)[:-1]) if n_clusters else []
    base = np.cumsum(size) - size
    return _Release(names, len(names), size, joint_of, items, unit_owner.astype(np.int64),
                    unit_shared, sub_unit.astype(np.int64), pos[sub_rows].astype(np.int64),
                    sub_indptr, code[held], base, members)


def _ascending_rows(values: np.ndarray, indptr: np.ndarray) -> bool:
    """True when every CSR row is strictly increasing (sorted, no repeats)."""
    if len(values) < 2:
        return True
    starts = np.zeros(len(values), dtype=bool)
    starts[indptr[:-1][indptr[:-1] < len(values)]] = True
    return not (np.diff(values)[~starts[1:]] <= 0).any()


def original_records(dataset: Dataset) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Each patient's distinct codes as CSR (code ids local to the original, sorted)."""
    diag = dataset.diagnoses
    rec = dataset.patients.index.get_indexer(diag[PATIENT_ID])
    code, names = pd.factorize(diag[CODE].astype(str), sort=True)
    keep = rec >= 0
    c = max(len(names), 1)
    key = _distinct(rec[keep].astype(np.int64) * c + code[keep])
    indptr = np.zeros(dataset.n_patients + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // c, minlength=dataset.n_patients), out=indptr[1:])
    return [str(x) for x in names], indptr, key % c


# --------------------------------------------------------------------------- array helpers
def pairs_in_rows(indptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Element positions (i, j), i < j, of every pair inside each CSR row."""
    lengths = np.diff(indptr)
    n = int(indptr[-1])
    row = np.repeat(np.arange(len(lengths)), lengths)
    after = (indptr[1:][row] - 1 - np.arange(n)) if n else np.zeros(0, dtype=np.int64)
    first = np.repeat(np.arange(n), after)
    second = first + 1 + np.arange(len(first)) - np.repeat(np.cumsum(after) - after, after)
    return first, second


def _row_batches(indptr: np.ndarray) -> Iterator[tuple[int, int]]:
    """Row ranges whose pairs stay under :data:`BATCH_PAIRS` (a row is never split)."""
    lengths = np.diff(indptr)
    cost = np.cumsum(lengths * (lengths - 1) // 2)
    start = 0
    while start < len(lengths):
        done = cost[start - 1] if start else 0
        stop = max(int(np.searchsorted(cost, done + BATCH_PAIRS, "right")), start + 1)
        yield start, stop
        start = stop


def _distinct(values: np.ndarray, space: int = 0) -> np.ndarray:
    """Sorted distinct values; counted in an array instead of sorted when the values are
    known to lie in ``range(space)`` and that range is at most :data:`DENSE_KEYS`."""
    if 0 < space <= DENSE_KEYS:
        return np.flatnonzero(np.bincount(values, minlength=space))
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _counted(values: np.ndarray, space: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and how often each occurs (``space`` as in :func:`_distinct`)."""
    if 0 < space <= DENSE_KEYS:
        counts = np.bincount(values, minlength=space)
        present = np.flatnonzero(counts)
        return present, counts[present]
    ordered = np.sort(values)
    if not len(ordered):
        return ordered, ordered.astype(np.int64)
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return ordered[starts], np.diff(np.r_[starts, len(ordered)])


def _min_by_key(keys: np.ndarray, values: np.ndarray, space: int = 0
                ) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (sorted) and the smallest value of each (``space`` as in
    :func:`_distinct`)."""
    if 0 < space <= DENSE_KEYS:
        best = np.full(space, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(best, keys, values)
        present = np.flatnonzero(best < np.iinfo(np.int64).max)
        return present, best[present]
    top = int(values.max()) + 1 if len(values) else 1
    if len(keys) and int(keys.max()) < np.iinfo(np.int64).max // top:
        order = np.argsort(keys * top + values)
    else:
        order = np.lexsort((values, keys))
    keys, values = keys[order], values[order]
    first = np.r_[True, keys[1:] != keys[:-1]] if len(keys) else np.zeros(0, dtype=bool)
    return keys[first], values[first]


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at ``query`` keys, 0 where absent (``keys`` sorted)."""
    if not len(keys):
        return np.zeros(len(query), dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[at] == query, values[at], 0)


# --------------------------------------------------------------------------- the domain
@dataclass(frozen=True)
class _Domain:
    """Per cluster, every code it can hold: ``(cluster, code, unit or -1 for the item
    chunk, value)`` sorted by cluster, value = the code's support in its unit (|P| for an
    item-chunk code). A joint cluster's shared codes are in the domain of every member."""

    cluster: np.ndarray
    code: np.ndarray
    unit: np.ndarray
    value: np.ndarray
    pair_keys: np.ndarray       # unit·C² + a·C + b for pairs inside one subrecord
    pair_counts: np.ndarray


def build_domain(r: _Release) -> _Domain:
    c = r.n_codes
    owner_sub = r.sub_unit[np.repeat(np.arange(len(r.sub_unit)), np.diff(r.sub_indptr))]
    uk, us = _counted(owner_sub * c + r.sub_codes)
    unit, code = uk // c, uk % c
    a, b = pairs_in_rows(r.sub_indptr)
    pk, pn = _counted(owner_sub[a] * c * c + r.sub_codes[a] * c + r.sub_codes[b])
    rec = ~r.unit_shared[unit]
    parts = [(r.unit_owner[unit[rec]], code[rec], unit[rec], us[rec])]
    sh = np.flatnonzero(~rec)
    for j, ps in enumerate(r.joint_members):
        rows = sh[r.unit_owner[unit[sh]] == j]
        for p in ps:
            parts.append((np.full(len(rows), p), code[rows], unit[rows], us[rows]))
    n_items = [len(x) for x in r.items]
    item_cluster = np.repeat(np.arange(len(r.items)), n_items)
    parts.append((item_cluster, np.concatenate(r.items) if r.items else np.zeros(0, np.int64),
                  np.full(len(item_cluster), -1), r.size[item_cluster]))
    cl, co, un, va = (np.concatenate([np.asarray(x[i], dtype=np.int64) for x in parts])
                      for i in range(4))
    order = np.lexsort((co, cl))
    return _Domain(cl[order], co[order], un[order], va[order], pk, pn)


def unlinked_candidates(r: _Release, d: _Domain, m: int
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Smallest positive cand_P(S) per code and per pair of codes (sorted keys a·C + b)."""
    c = r.n_codes
    single = np.minimum(d.value, r.size[d.cluster])
    k1, v1 = _min_by_key(d.code[single > 0], single[single > 0], c)
    keys: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    if m >= 2:
        indptr = np.r_[0, np.cumsum(np.bincount(d.cluster, minlength=len(r.size)))]
        for lo, hi in _row_batches(indptr):
            x, y = pairs_in_rows(indptr[lo:hi + 1] - indptr[lo])
            x, y = x + indptr[lo], y + indptr[lo]
            v = np.minimum(np.minimum(d.value[x], d.value[y]), r.size[d.cluster[x]])
            same = np.flatnonzero((d.unit[x] == d.unit[y]) & (d.unit[x] >= 0))
            v[same] = np.minimum(v[same], _lookup(
                d.pair_keys, d.pair_counts,
                d.unit[x[same]] * c * c + d.code[x[same]] * c + d.code[y[same]]))
            ok = v > 0
            kk, vv = _min_by_key(d.code[x][ok] * c + d.code[y][ok], v[ok], c * c)
            keys.append(kk)
            vals.append(vv)
    k2, v2 = _min_by_key(np.concatenate(keys), np.concatenate(vals), c * c) if keys else \
        (np.zeros(0, np.int64), np.zeros(0, np.int64))
    return k1, v1, k2, v2


# --------------------------------------------------------------------------- positions
def positions_of(r: _Release, sub_pos: np.ndarray) -> np.ndarray:
    """The record position (global) a positional reading gives each subrecord."""
    owner = r.unit_owner[r.sub_unit]
    shared = r.unit_shared[r.sub_unit]
    out = np.empty(len(sub_pos), dtype=np.int64)
    out[~shared] = r.base[owner[~shared]] + sub_pos[~shared]
    if shared.any():
        maps = [np.concatenate([r.base[p] + np.arange(r.size[p]) for p in ps])
                for ps in r.joint_members]
        starts = np.cumsum([0] + [len(x) for x in maps])
        flat = np.concatenate(maps)
        out[shared] = flat[starts[owner[shared]] + sub_pos[shared]]
    return out


def _position_rows(r: _Release, sub_pos: np.ndarray, only: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR over global positions of the codes a positional reading puts there, with the
    unit (chunk) each code comes from; ``only`` (a mask of subrecords) limits the reading
    to the positions that matter."""
    lengths = np.diff(r.sub_indptr)
    pos = np.repeat(positions_of(r, sub_pos), lengths)
    codes, units = r.sub_codes, np.repeat(r.sub_unit, lengths)
    if only is not None:
        keep = np.repeat(only, lengths)
        pos, codes, units = pos[keep], codes[keep], units[keep]
    order = np.argsort(pos, kind="stable")
    n_pos = int(r.size.sum())
    indptr = np.zeros(n_pos + 1, dtype=np.int64)
    np.cumsum(np.bincount(pos, minlength=n_pos), out=indptr[1:])
    return indptr, codes[order], units[order]


@dataclass(frozen=True)
class _Original:
    """The original records over the release's code numbering, and what the test needs:
    pair supports (sorted keys a·C + b), record × code keys (sorted r·C + t), each code's
    records (CSR by code) and support."""

    indptr: np.ndarray
    codes: np.ndarray
    pair_keys: np.ndarray
    pair_counts: np.ndarray
    record_keys: np.ndarray
    by_code_indptr: np.ndarray
    by_code: np.ndarray
    support: np.ndarray


def _original_tables(indptr: np.ndarray, codes: np.ndarray, c: int) -> _Original:
    a, b = pairs_in_rows(indptr)
    pk, pn = _counted(codes[a] * c + codes[b], c * c)
    rec = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    support = np.bincount(codes, minlength=c)
    order = np.argsort(codes, kind="stable")
    return _Original(indptr, codes, pk, pn, rec * c + codes,
                     np.r_[0, np.cumsum(support)].astype(np.int64), rec[order], support)


def _unmatched_positions(indptr: np.ndarray, codes: np.ndarray, rows: np.ndarray,
                         clusters: np.ndarray, item_keys: np.ndarray, o: _Original, c: int
                         ) -> tuple[np.ndarray | None, int]:
    """Which of the positions ``rows`` (of ``clusters``) no original record can be, and the
    lookups that took (None when it would cost more than :data:`SUBSET_BUDGET`).

    A record can be a position if it holds every code there and its other codes are all in
    the cluster's item chunk (``item_keys``: sorted cluster·C + code)."""
    lengths = np.diff(indptr)[rows]
    starts = indptr[rows]
    flat = np.repeat(starts, lengths) + np.arange(int(lengths.sum())) \
        - np.repeat(np.cumsum(lengths) - lengths, lengths)
    owner = np.repeat(np.arange(len(rows)), lengths)
    support = o.support[codes[flat]]
    rarest = flat[np.lexsort((support, owner))][np.r_[0, np.cumsum(lengths)[:-1]]] \
        if len(rows) else flat[:0]
    holders = o.support[codes[rarest]]
    cost = int((holders * lengths).sum())
    if cost > SUBSET_BUDGET:
        return None, 0
    pos = np.repeat(np.arange(len(rows)), holders)
    first = o.by_code_indptr[codes[rarest]]
    record = o.by_code[np.repeat(first, holders) + np.arange(int(holders.sum()))
                       - np.repeat(np.cumsum(holders) - holders, holders)]
    # every (candidate record, code of the position) must be a record × code of the original
    per = lengths[pos]
    cand = np.repeat(np.arange(len(pos)), per)
    code = codes[np.repeat(starts[pos], per) + np.arange(int(per.sum()))
                 - np.repeat(np.cumsum(per) - per, per)]
    hit = _lookup(o.record_keys, np.ones(len(o.record_keys), dtype=np.int64),
                  record[cand] * c + code)
    whole = np.flatnonzero(np.bincount(cand, weights=hit, minlength=len(pos)) == per)
    size = np.diff(o.indptr)[record[whole]]
    pair = np.repeat(np.arange(len(whole)), size)
    own = o.codes[np.repeat(o.indptr[record[whole]], size) + np.arange(int(size.sum()))
                  - np.repeat(np.cumsum(size) - size, size)]
    in_items = _lookup(item_keys, np.ones(len(item_keys), dtype=np.int64),
                       clusters[pos[whole]][pair] * c + own)
    exact = np.bincount(pair, weights=in_items, minlength=len(whole)) + per[whole] == size
    matched = np.bincount(pos[whole[exact]], minlength=len(rows)) > 0
    return ~matched, cost


@dataclass(frozen=True)
class _CrossBounds:
    """What a true positional reading must show for each pair of codes that some cluster
    holds in two different chunks (sorted keys a·C + b).

    Under it, the positions holding a and b from different chunks are exactly the original
    records holding both, minus those that hold both inside one subrecord (published) and
    minus those where a or b sits in the record's item chunk (at most |P| per such cluster):
    ``lo ≤ cross(a, b) ≤ hi``. ``only_group`` is the one group where a and b can meet across
    chunks (-1 if several), so a miss there is that group's own contradiction.
    """

    keys: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    only_group: np.ndarray
    item_keys: np.ndarray       # sorted cluster·C + code of every item-chunk code


def cross_bounds(r: _Release, d: _Domain, o: _Original, group_of_cluster: np.ndarray
                 ) -> _CrossBounds:
    c = r.n_codes
    chunked = d.unit >= 0
    cl, co, un = d.cluster[chunked], d.code[chunked], d.unit[chunked]
    first = np.r_[True, (cl[1:] != cl[:-1]) | (un[1:] != un[:-1])] if len(cl) else chunked[:0]
    multi = np.bincount(cl[first], minlength=len(r.size)) >= 2   # ≥ 2 chunks share positions
    keep = multi[cl]
    cl, co, un = cl[keep], co[keep], un[keep]
    indptr = np.r_[0, np.cumsum(np.bincount(cl, minlength=len(r.size)))]
    x, y = pairs_in_rows(indptr)
    across = un[x] != un[y]
    x, y = x[across], y[across]
    key = np.minimum(co[x], co[y]) * c + np.maximum(co[x], co[y])
    gk = _distinct(group_of_cluster[cl[x]] * c * c + key)
    gk = gk[np.argsort(gk % (c * c), kind="stable")]
    keys, n_groups = _counted(gk % (c * c))
    only = np.where(n_groups == 1, (gk // (c * c))[np.cumsum(n_groups) - n_groups], -1)
    same = _sum_by_key(d.pair_keys % (c * c), d.pair_counts)
    hi = _lookup(o.pair_keys, o.pair_counts, keys) - _lookup(*same, keys)
    qa, qb = keys // c, keys % c
    needed = np.zeros(c, dtype=bool)
    needed[qa] = needed[qb] = True
    rows = needed[d.code]
    item = rows & (d.unit < 0)
    shape = (len(r.size), c)
    items = sparse.csr_matrix((r.size[d.cluster[item]].astype(float),
                               (d.cluster[item], d.code[item])), shape=shape)
    domain = sparse.csr_matrix((np.ones(int(rows.sum())), (d.cluster[rows], d.code[rows])),
                               shape=shape)
    either = (items.T @ domain).tocsr()
    slack = (np.asarray(either[qa, qb]).ravel() + np.asarray(either[qb, qa]).ravel()
             if len(keys) else np.zeros(0))
    item_keys = _distinct(np.concatenate([p * c + x for p, x in enumerate(r.items)])
                          if r.items else np.zeros(0, dtype=np.int64))
    return _CrossBounds(keys, hi - slack.astype(np.int64), hi, only, item_keys)


def _sum_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (sorted) and the sum of their values."""
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    if not len(keys):
        return keys, values
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[starts], np.add.reduceat(values, starts)


def _cheapest(indptr: np.ndarray, codes: np.ndarray, rows: np.ndarray, o: _Original
              ) -> np.ndarray:
    """The positions among ``rows`` cheapest to match against the original (those holding
    a rare code: also the likeliest to contradict a wrong reading), within
    :data:`SUBSET_BUDGET` lookups in all."""
    lengths = np.diff(indptr)
    held = np.flatnonzero(lengths > 0)
    if not len(rows) or not len(held):
        return rows[:0]
    rarest = np.zeros(len(lengths), dtype=np.int64)
    rarest[held] = np.minimum.reduceat(o.support[codes], indptr[held])
    cost = rarest[rows] * lengths[rows]
    order = np.argsort(cost, kind="stable")
    return np.sort(rows[order[np.cumsum(cost[order]) <= SUBSET_BUDGET]])


def refuted_groups(r: _Release, sub_pos: np.ndarray, group_of_pos: np.ndarray,
                   o: _Original, bounds: _CrossBounds, linked: np.ndarray, *,
                   count: bool = True) -> int:
    """Groups a positional reading contradicts, -1 when only release-wide figures do.

    A group is contradicted when a pair of codes shares more of its positions than original
    records hold the pair, when a pair it alone can join across chunks misses its bounds
    (:class:`_CrossBounds`), or (within :data:`SUBSET_BUDGET`) when a position joins codes
    of several chunks that no original record holds together. ``count=False`` stops at the
    first contradiction (enough to refute the release's own order). Only the subrecords
    ``linked`` (those of groups where some cluster has two chunks) are read: elsewhere a
    position holds one subrecord, whatever the order.
    """
    indptr, codes, units = _position_rows(r, sub_pos, linked)
    a, b = pairs_in_rows(indptr)
    c = r.n_codes
    lo_code, hi_code = np.minimum(codes[a], codes[b]), np.maximum(codes[a], codes[b])
    pair = lo_code * c + hi_code
    row = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    group = group_of_pos[row[a]]
    gk, gn = _counted(group * c * c + pair)
    bad = set((gk[gn > _lookup(o.pair_keys, o.pair_counts, gk % (c * c))] // (c * c)).tolist())
    across = units[a] != units[b]
    at = np.searchsorted(bounds.keys, pair[across])
    crossed = np.bincount(at, minlength=len(bounds.keys))[:len(bounds.keys)]
    missed = (crossed < bounds.lo) | (crossed > bounds.hi)
    bad.update(bounds.only_group[missed & (bounds.only_group >= 0)].tolist())
    if bad and not count:
        return len(bad)
    nonempty = (np.diff(r.sub_indptr) > 0) & linked
    units_at = np.bincount(positions_of(r, sub_pos)[nonempty], minlength=len(indptr) - 1)
    multi = np.flatnonzero(units_at >= 2)
    rows = _cheapest(indptr, codes, multi, o)
    if len(rows):
        cluster_of_pos = np.repeat(np.arange(len(r.size)), r.size)
        unmatched, _ = _unmatched_positions(indptr, codes, rows, cluster_of_pos[rows],
                                            bounds.item_keys, o, c)
        if unmatched is not None:
            bad.update(group_of_pos[rows[unmatched]].tolist())
    if bad:
        return len(bad)
    return -1 if missed.any() else 0


@dataclass(frozen=True)
class PositionalTest:
    """Whether the subrecord order can be read as records, and the evidence."""

    positional: bool
    linked_groups: int          # groups where a position can join ≥ 2 chunks
    refuted_observed: int       # groups (or -1: the release-wide total) refuting the reading
    mean_refuted_reshuffled: float


def positional_test(r: _Release, d: _Domain, o: _Original) -> PositionalTest:
    """Test the positional reading against the original and against reshuffles."""
    group_cluster = np.where(r.joint_of >= 0, len(r.size) + r.joint_of,
                             np.arange(len(r.size)))
    chunked = d.unit >= 0
    place = _distinct(d.cluster[chunked] * max(len(r.unit_owner), 1) + d.unit[chunked])
    multi = np.bincount(place // max(len(r.unit_owner), 1), minlength=len(r.size)) >= 2
    linked = len(_distinct(group_cluster[multi]))
    if not linked:
        return PositionalTest(False, 0, 0, 0.0)
    group_of_pos = np.repeat(group_cluster, r.size)
    bounds = cross_bounds(r, d, o, group_cluster)
    is_linked = np.zeros(len(r.size) + len(r.joint_members), dtype=bool)
    is_linked[group_cluster[multi]] = True
    unit_group = np.where(r.unit_shared, len(r.size) + r.unit_owner,
                          group_cluster[np.minimum(r.unit_owner, len(r.size) - 1)])
    sub_linked = is_linked[unit_group][r.sub_unit]
    observed = refuted_groups(r, r.sub_pos, group_of_pos, o, bounds, sub_linked, count=False)
    if observed:
        return PositionalTest(False, linked, observed, float("nan"))
    rng = np.random.default_rng(SEED)
    slots = np.lexsort((r.sub_pos, r.sub_unit))
    total, runs = 0, 0
    for _ in range(RESHUFFLES):
        order = np.lexsort((rng.random(len(r.sub_unit)), r.sub_unit))
        shuffled = np.empty(len(order), dtype=np.int64)
        shuffled[order] = r.sub_pos[slots]
        # a release-wide contradiction (-1) is not a group's: it does not count
        total += max(0, refuted_groups(r, shuffled, group_of_pos, o, bounds, sub_linked))
        runs += 1
        if total >= EXPECTED_REFUTATIONS * RESHUFFLES:
            break                     # the mean over all reshuffles is already high enough
    mean = total / runs
    return PositionalTest(total >= EXPECTED_REFUTATIONS * RESHUFFLES or
                          mean >= EXPECTED_REFUTATIONS, linked, 0, mean)


def positional_candidates(r: _Release, m: int
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Under the positional reading: per code and pair, the smallest positive number of
    positions of one cluster holding it (item-chunk codes may sit at any position)."""
    indptr, codes, _ = _position_rows(r, r.sub_pos)
    n_pos = len(indptr) - 1
    cluster_of_pos = np.repeat(np.arange(len(r.size)), r.size)
    n_items = np.array([len(x) for x in r.items], dtype=np.int64)
    extra = n_items[cluster_of_pos]
    row = np.concatenate([np.repeat(np.arange(n_pos), np.diff(indptr)),
                          np.repeat(np.arange(n_pos), extra)])
    item_codes = np.concatenate([np.tile(r.items[p], int(r.size[p])) for p in
                                 range(len(r.size))]) if len(r.size) else codes[:0]
    key = _distinct(row * r.n_codes + np.concatenate([codes, item_codes]))
    indptr = np.zeros(n_pos + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // r.n_codes, minlength=n_pos), out=indptr[1:])
    codes, c = key % r.n_codes, r.n_codes
    prow = key // r.n_codes
    ck, cn = _counted(cluster_of_pos[prow] * c + codes)
    k1, v1 = _min_by_key(ck % c, cn, c)
    k2 = v2 = np.zeros(0, dtype=np.int64)
    if m >= 2:
        a, b = pairs_in_rows(indptr)
        ck, cn = _counted((cluster_of_pos[prow[a]] * c + codes[a]) * c + codes[b])
        k2, v2 = _min_by_key(ck % (c * c), cn, c * c)
    return k1, v1, k2, v2


# --------------------------------------------------------------------------- general m
class _ByCluster:
    """cand_P(S) and the positional count for any S, by direct enumeration (any m)."""

    def __init__(self, r: _Release, d: _Domain, positional: bool) -> None:
        self.r = r
        self.place: list[dict[int, tuple[int, int]]] = [{} for _ in range(len(r.size))]
        self.holders: dict[int, set[int]] = {}
        for p, t, u, v in zip(d.cluster.tolist(), d.code.tolist(), d.unit.tolist(),
                              d.value.tolist(), strict=True):
            self.place[p][t] = (u, v)
            self.holders.setdefault(t, set()).add(p)
        self.subs: dict[int, list[frozenset[int]]] = {}
        flat, bounds = r.sub_codes.tolist(), r.sub_indptr.tolist()
        for s, u in enumerate(r.sub_unit.tolist()):
            self.subs.setdefault(u, []).append(frozenset(flat[bounds[s]:bounds[s + 1]]))
        self.rows: list[list[frozenset[int]]] = []
        if positional:
            indptr, codes, _ = _position_rows(r, r.sub_pos)
            ip, cs = indptr.tolist(), codes.tolist()
            for p in range(len(r.size)):
                extra = frozenset(r.items[p].tolist())
                lo = int(r.base[p])
                self.rows.append([frozenset(cs[ip[i]:ip[i + 1]]) | extra
                                  for i in range(lo, lo + int(r.size[p]))])
        self.cache: dict[tuple[int, frozenset[int]], int] = {}

    def _support(self, unit: int, part: frozenset[int]) -> int:
        key = (unit, part)
        if key not in self.cache:
            self.cache[key] = sum(1 for s in self.subs.get(unit, ()) if part <= s)
        return self.cache[key]

    def unlinked(self, p: int, s: tuple[int, ...]) -> int:
        place = self.place[p]
        parts: dict[int, set[int]] = {}
        best = int(self.r.size[p])
        for t in s:
            u, v = place[t]
            if u >= 0:
                parts.setdefault(u, set()).add(t)
        for u, part in parts.items():
            best = min(best, self._support(u, frozenset(part)))
        return best

    def positional(self, p: int, s: tuple[int, ...]) -> int:
        want = frozenset(s)
        return sum(1 for row in self.rows[p] if want <= row)

    def candidates(self, s: tuple[int, ...], positional: bool) -> int:
        clusters = set.intersection(*(self.holders.get(t, set()) for t in s))
        counts = [self.positional(p, s) if positional else self.unlinked(p, s)
                  for p in clusters]
        return min((x for x in counts if x > 0), default=0)


# --------------------------------------------------------------------------- knowledge sets
def _sets_of(row: list[int], m: int) -> Iterator[tuple[int, ...]]:
    for size in range(1, min(m, len(row)) + 1):
        yield from combinations(row, size)


def knowledge_sets(records: list[list[int]], m: int, rare: set[int]
                   ) -> tuple[set[tuple[int, ...]], int, bool]:
    """Distinct knowledge sets to evaluate, how many (patient, set) pairs they stand for,
    and whether that is every one (see the module docstring)."""
    total = sum(sum(comb(len(r), i) for i in range(1, min(m, len(r)) + 1)) for r in records)
    if total <= EXHAUSTIVE_LIMIT:
        return {s for r in records for s in _sets_of(r, m)}, total, True
    rng = np.random.default_rng(SEED)
    holding = [r for r in records if r]
    chosen: set[tuple[int, ...]] = set()
    for i in rng.integers(0, len(holding), MIN_SAMPLED).tolist():
        row = holding[i]
        size = int(rng.integers(1, min(m, len(row)) + 1))
        chosen.add(tuple(sorted(rng.choice(row, size, replace=False).tolist())))
    tried = MIN_SAMPLED
    for r in records:
        own_rare = [t for t in r if t in rare]
        for s in _sets_of(own_rare, m):
            chosen.add(s)
            tried += 1
    return chosen, tried, False


# --------------------------------------------------------------------------- the attack
def _report(m: int, k: int, tried: int, exhaustive: bool, smallest: int | None,
            measured: str) -> AttackReport:
    return AttackReport(
        attacker_model=f"knows up to {m} codes of the target and which cluster holds it, "
                       "holds the whole release and reads subrecord order as records "
                       "wherever that order links chunks",
        knowledge_sets_tried=tried, exhaustive=exhaustive, smallest_candidate_set=smallest,
        threshold=k, passed=smallest is not None and smallest >= k, measured=measured)


def _order_words(test: PositionalTest) -> str:
    if test.positional:
        return (f"subrecord order read as records (no refutation in {test.linked_groups:,} "
                f"multi-chunk groups; reshuffles refute {test.mean_refuted_reshuffled:.1f} "
                "on average)")
    if not test.linked_groups:
        return "no group has two chunks for the order to link"
    if test.refuted_observed:
        where = ("release-wide" if test.refuted_observed < 0 else
                 f"in {test.refuted_observed:,} of {test.linked_groups:,} multi-chunk groups")
        return f"positional reading refuted {where}"
    return (f"positional reading not refuted, but reshuffles refute only "
            f"{test.mean_refuted_reshuffled:.1f} groups on average: order not distinguishable "
            "from independent shuffles")


def attack(files: dict[str, bytes], original: Dataset, params: dict[str, Any]) -> AttackReport:
    """The k^m adversary on a disassociated release (see the module docstring)."""
    k, m = int(params["k"]), int(params["m"])
    names, orig_indptr, orig_local = original_records(original)
    try:
        r = read_release(files.get(RELEASE_FILE, b""), names)
    except _Unreadable as exc:
        return _report(m, k, 0, False, None, f"the release cannot be read: {exc}")
    except _Unbounded as exc:
        return _report(m, k, 0, False, 1, f"{exc}: it can carry a per-record value, so the "
                       "attacker is assumed to single a record out (candidate set 1)")
    c = r.n_codes
    index = {name: i for i, name in enumerate(r.names)}
    remap = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
    orig_codes = remap[orig_local] if len(orig_local) else orig_local
    o = _original_tables(orig_indptr, orig_codes, c)
    d = build_domain(r)
    test = positional_test(r, d, o)
    if m <= 2:
        k1, v1, k2, v2 = (positional_candidates(r, m) if test.positional
                          else unlinked_candidates(r, d, m))
        singles = _distinct(orig_codes, c)
        found = [_lookup(k1, v1, singles)]
        if m >= 2:
            found.append(_lookup(k2, v2, o.pair_keys))
        values = np.concatenate(found)
        lengths = np.diff(orig_indptr)
        tried = int(lengths.sum() + (lengths * (lengths - 1) // 2).sum() if m >= 2
                    else lengths.sum())
        exhaustive = True
    else:
        bounds, flat = orig_indptr.tolist(), orig_codes.tolist()
        records = [flat[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
        support = np.bincount(orig_codes, minlength=c)
        rare = set(np.flatnonzero((support > 0) & (support < k)).tolist())
        sets, tried, exhaustive = knowledge_sets(records, m, rare)
        by = _ByCluster(r, d, test.positional)
        values = np.array([by.candidates(s, test.positional) for s in sorted(sets)],
                          dtype=np.int64)
    smallest = int(values.min()) if len(values) else None
    below = int((values < k).sum()) if len(values) else 0
    kind = "every one" if exhaustive else "seeded sample plus every rare-code set"
    measured = (f"smallest candidate set {smallest:,} over {tried:,} knowledge sets ({kind}; "
                f"{len(values):,} distinct, {below:,} below k); {_order_words(test)}"
                if smallest is not None else "no patient holds a code: nothing to attack")
    if smallest == 0:
        measured += ("; 0: some patient's codes fit no cluster, so the release does not hold "
                     "that patient as published")
    report = replace(_report(m, k, tried, exhaustive, smallest, measured),
                     candidate_set_sizes=candidate_set_distribution(values))
    if smallest is None:
        return replace(report, passed=True)
    return report
