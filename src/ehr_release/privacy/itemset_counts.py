"""Counting the ≤ m-itemsets of many rows, partition by partition.

For m > 2 the disassociation verifier enumerates itemsets in pure Python — the one part of
verification whose cost grows with m and does not vectorize. Rows (original records, or the
subrecords of the release's chunks) are cut into contiguous partitions, each partition is
counted by :func:`count_partition`, and the counters are summed. A caller may pass a
``map_fn`` that runs the partitions elsewhere (the registry passes one that submits them as
Prefect tasks when the flow runs on Dask worker processes); without one they run here, in
order. Counting is a sum, so the result does not depend on how rows are partitioned.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import numpy as np

from ehr_release.model.mapping import MapFn, serial_map

Itemset = tuple[int, ...]
#: Rows per partition: large enough that shipping a partition costs less than counting it.
PARTITION_ROWS = 50_000

# (row offsets from 0, codes of those rows, group of each row or None, m)
Partition = tuple[np.ndarray, np.ndarray, np.ndarray | None, int]


def count_partition(part: Partition) -> dict[int, Counter[Itemset]]:
    """Group → count of every itemset of 1..m codes in that group's rows of ``part``."""
    indptr, codes, groups, m = part
    out: dict[int, Counter[Itemset]] = {}
    group_of = groups.tolist() if groups is not None else [0] * (len(indptr) - 1)
    for g, lo, hi in zip(group_of, indptr[:-1].tolist(), indptr[1:].tolist(), strict=True):
        row = codes[lo:hi].tolist()
        counter = out.setdefault(g, Counter())
        for size in range(1, min(m, len(row)) + 1):
            counter.update(combinations(row, size))
    return out


def partitions(indptr: np.ndarray, codes: np.ndarray, groups: np.ndarray | None, m: int,
               size: int | None = None) -> list[Partition]:
    """Contiguous slices of ``size`` rows (default :data:`PARTITION_ROWS`)."""
    size = size or PARTITION_ROWS
    n = len(indptr) - 1
    out = []
    for start in range(0, n, size):
        stop = min(n, start + size)
        lo, hi = int(indptr[start]), int(indptr[stop])
        out.append((indptr[start:stop + 1] - lo, codes[lo:hi],
                    None if groups is None else groups[start:stop], m))
    return out


def count_itemsets(indptr: np.ndarray, codes: np.ndarray, groups: np.ndarray | None, m: int,
                   map_fn: MapFn | None = None) -> dict[int, Counter[Itemset]]:
    """Group → itemset counts over all rows (one group, 0, when ``groups`` is None)."""
    parts = partitions(indptr, codes, groups, m)
    results = (map_fn or serial_map)(count_partition, parts)
    total: dict[int, Counter[Itemset]] = {}
    for result in results:
        for g, counter in result.items():
            if g in total:
                total[g].update(counter)
            else:
                total[g] = counter
    return total
