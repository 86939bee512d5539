"""Can the subrecord order be read as records? The positional test: a reading is refuted
when it contradicts the original, and accepted only when independent reshuffles would be
refuted far more often than the published order (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ehr_release.privacy.attacks.disassociation.arrays import (
    counted,
    distinct,
    lookup,
    pairs_in_rows,
    sum_by_key,
)
from ehr_release.privacy.attacks.disassociation.candidates import Domain
from ehr_release.privacy.attacks.disassociation.original import Original
from ehr_release.privacy.attacks.disassociation.positions import position_rows, positions_of
from ehr_release.privacy.attacks.disassociation.release import Release

#: Seed of the knowledge-set sample and of the reshuffles (the audit is deterministic).
SEED = 14
#: Reshuffles that test a positional reading against independent shuffles.
RESHUFFLES = 20
#: Mean number of refuted groups per reshuffle needed to read a release positionally.
EXPECTED_REFUTATIONS = 14.0
#: Record × code lookups the positional test spends, per reading, checking that positions
#: joining several chunks are held by some original record (beyond it, pair counts only).
SUBSET_BUDGET = 1_000_000


def _unmatched_positions(indptr: np.ndarray, codes: np.ndarray, rows: np.ndarray,
                         clusters: np.ndarray, item_keys: np.ndarray, o: Original, c: int
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
    hit = lookup(o.record_keys, np.ones(len(o.record_keys), dtype=np.int64),
                  record[cand] * c + code)
    whole = np.flatnonzero(np.bincount(cand, weights=hit, minlength=len(pos)) == per)
    size = np.diff(o.indptr)[record[whole]]
    pair = np.repeat(np.arange(len(whole)), size)
    own = o.codes[np.repeat(o.indptr[record[whole]], size) + np.arange(int(size.sum()))
                  - np.repeat(np.cumsum(size) - size, size)]
    in_items = lookup(item_keys, np.ones(len(item_keys), dtype=np.int64),
                       clusters[pos[whole]][pair] * c + own)
    exact = np.bincount(pair, weights=in_items, minlength=len(whole)) + per[whole] == size
    matched = np.bincount(pos[whole[exact]], minlength=len(rows)) > 0
    return ~matched, cost


@dataclass(frozen=True)
class CrossBounds:
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


def cross_bounds(r: Release, d: Domain, o: Original, group_of_cluster: np.ndarray
                 ) -> CrossBounds:
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
    gk = distinct(group_of_cluster[cl[x]] * c * c + key)
    gk = gk[np.argsort(gk % (c * c), kind="stable")]
    keys, n_groups = counted(gk % (c * c))
    only = np.where(n_groups == 1, (gk // (c * c))[np.cumsum(n_groups) - n_groups], -1)
    same = sum_by_key(d.pair_keys % (c * c), d.pair_counts)
    hi = lookup(o.pair_keys, o.pair_counts, keys) - lookup(*same, keys)
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
    item_keys = distinct(np.repeat(np.arange(len(r.size)), np.diff(r.item_indptr)) * c
                         + r.item_codes)
    return CrossBounds(keys, hi - slack.astype(np.int64), hi, only, item_keys)


def _cheapest(indptr: np.ndarray, codes: np.ndarray, rows: np.ndarray, o: Original
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


def refuted_groups(r: Release, sub_pos: np.ndarray, group_of_pos: np.ndarray,
                   o: Original, bounds: CrossBounds, linked: np.ndarray, *,
                   count: bool = True) -> int:
    """Groups a positional reading contradicts, -1 when only release-wide figures do.

    A group is contradicted when a pair of codes shares more of its positions than original
    records hold the pair, when a pair it alone can join across chunks misses its bounds
    (:class:`CrossBounds`), or (within :data:`SUBSET_BUDGET`) when a position joins codes
    of several chunks that no original record holds together. ``count=False`` stops at the
    first contradiction (enough to refute the release's own order). Only the subrecords
    ``linked`` (those of groups where some cluster has two chunks) are read: elsewhere a
    position holds one subrecord, whatever the order.
    """
    indptr, codes, units = position_rows(r, sub_pos, linked)
    a, b = pairs_in_rows(indptr)
    c = r.n_codes
    lo_code, hi_code = np.minimum(codes[a], codes[b]), np.maximum(codes[a], codes[b])
    pair = lo_code * c + hi_code
    row = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    group = group_of_pos[row[a]]
    gk, gn = counted(group * c * c + pair)
    bad = set((gk[gn > lookup(o.pair_keys, o.pair_counts, gk % (c * c))] // (c * c)).tolist())
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


def positional_test(r: Release, d: Domain, o: Original) -> PositionalTest:
    """Test the positional reading against the original and against reshuffles."""
    group_cluster = np.where(r.joint_of >= 0, len(r.size) + r.joint_of,
                             np.arange(len(r.size)))
    chunked = d.unit >= 0
    place = distinct(d.cluster[chunked] * max(len(r.unit_owner), 1) + d.unit[chunked])
    multi = np.bincount(place // max(len(r.unit_owner), 1), minlength=len(r.size)) >= 2
    linked = len(distinct(group_cluster[multi]))
    if not linked:
        return PositionalTest(False, 0, 0, 0.0)
    group_of_pos = np.repeat(group_cluster, r.size)
    bounds = cross_bounds(r, d, o, group_cluster)
    is_linked = np.zeros(len(r.size) + r.n_joints, dtype=bool)
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

