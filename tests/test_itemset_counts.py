"""Partitioned itemset counting gives the counts, and the verdicts, of a single pass."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.privacy import itemset_counts
from ehr_release.privacy.disassociation import check_km
from ehr_release.privacy.itemset_counts import count_itemsets
from tests.test_disassociation_verifier import FAST, _run, cases

rows = st.lists(st.tuples(st.integers(0, 3), st.sets(st.integers(0, 9), max_size=5)),
                max_size=40)


def _shuffled_map(fn, items):  # partitions finishing in any order, as on a cluster
    order = list(range(len(items)))
    random.Random(len(items)).shuffle(order)
    done = {i: fn(items[i]) for i in order}
    return [done[i] for i in range(len(items))]


@settings(max_examples=100, deadline=None)
@given(data=rows, m=st.integers(1, 4), size=st.integers(1, 7))
def test_counts_equal_a_direct_count(data, m, size):
    groups = np.array([g for g, _ in data], dtype=np.int64)
    codes = [sorted(c) for _, c in data]
    indptr = np.concatenate([[0], np.cumsum([len(c) for c in codes])]).astype(np.int64)
    flat = np.array([x for c in codes for x in c], dtype=np.int64)
    expected: dict[int, Counter] = {}
    for g, c in zip(groups.tolist(), codes, strict=True):
        counter = expected.setdefault(g, Counter())
        for s in range(1, min(m, len(c)) + 1):
            counter.update(combinations(c, s))
    original, itemset_counts.PARTITION_ROWS = itemset_counts.PARTITION_ROWS, size
    try:
        got = count_itemsets(indptr, flat, groups, m, map_fn=_shuffled_map)
    finally:
        itemset_counts.PARTITION_ROWS = original
    assert got == expected


@FAST
@given(case=cases())
def test_verdict_is_the_same_however_counting_is_partitioned(case):
    records, groups, k, m, seed = case
    result, ds = _run(records, groups, k, m, seed)
    files = {"release.parquet": result.release.to_bytes()}
    serial = check_km(files, ds, k, m, general=True)
    calls: list[int] = []

    def spy(fn, items):
        calls.append(len(items))
        return _shuffled_map(fn, items)

    original, itemset_counts.PARTITION_ROWS = itemset_counts.PARTITION_ROWS, 2
    try:
        spread = check_km(files, ds, k, m, general=True, map_fn=spy)
    finally:
        itemset_counts.PARTITION_ROWS = original
    assert spread.to_dict() == serial.to_dict()
    assert calls and max(calls) >= 2  # the counting really was split
