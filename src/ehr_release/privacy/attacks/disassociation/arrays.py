"""Sorted-key array helpers of the k^m attack: pairs inside CSR rows, distinct keys,
counts and minima per key, lookups. Everything the attack counts is an int64 key, so one
sort (or one bincount when the key range is small) does the work of a Python dict."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

#: Largest key range counted in an array instead of by sorting (int64: 256 MB at most).
DENSE_KEYS = 1 << 25
#: Pair rows generated per vectorized batch (bounds memory at 1M records).
BATCH_PAIRS = 8_000_000


def pairs_in_rows(indptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Element positions (i, j), i < j, of every pair inside each CSR row."""
    lengths = np.diff(indptr)
    n = int(indptr[-1])
    row = np.repeat(np.arange(len(lengths)), lengths)
    after = (indptr[1:][row] - 1 - np.arange(n)) if n else np.zeros(0, dtype=np.int64)
    first = np.repeat(np.arange(n), after)
    second = first + 1 + np.arange(len(first)) - np.repeat(np.cumsum(after) - after, after)
    return first, second


def row_batches(indptr: np.ndarray) -> Iterator[tuple[int, int]]:
    """Row ranges whose pairs stay under :data:`BATCH_PAIRS` (a row is never split)."""
    lengths = np.diff(indptr)
    cost = np.cumsum(lengths * (lengths - 1) // 2)
    start = 0
    while start < len(lengths):
        done = cost[start - 1] if start else 0
        stop = max(int(np.searchsorted(cost, done + BATCH_PAIRS, "right")), start + 1)
        yield start, stop
        start = stop


def distinct(values: np.ndarray, space: int = 0) -> np.ndarray:
    """Sorted distinct values; counted in an array instead of sorted when the values are
    known to lie in ``range(space)`` and that range is at most :data:`DENSE_KEYS`."""
    if 0 < space <= DENSE_KEYS:
        return np.flatnonzero(np.bincount(values, minlength=space))
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def counted(values: np.ndarray, space: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and how often each occurs (``space`` as in :func:`distinct`)."""
    if 0 < space <= DENSE_KEYS:
        counts = np.bincount(values, minlength=space)
        present = np.flatnonzero(counts)
        return present, counts[present]
    ordered = np.sort(values)
    if not len(ordered):
        return ordered, ordered.astype(np.int64)
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return ordered[starts], np.diff(np.r_[starts, len(ordered)])


def min_by_key(keys: np.ndarray, values: np.ndarray, space: int = 0
                ) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (sorted) and the smallest value of each (``space`` as in
    :func:`distinct`)."""
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


def lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at ``query`` keys, 0 where absent (``keys`` sorted)."""
    if not len(keys):
        return np.zeros(len(query), dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[at] == query, values[at], 0)



def sum_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (sorted) and the sum of their values."""
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    if not len(keys):
        return keys, values
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[starts], np.add.reduceat(values, starts)



def ranges(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs of the given lengths laid end to end: each element's run and its offset in
    that run (``np.repeat`` and a ramp: the vectorized form of a loop over runs)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    run = np.repeat(np.arange(len(lengths)), lengths)
    return run, np.arange(len(run)) - (np.cumsum(lengths) - lengths)[run]


def tiled(indptr: np.ndarray, values: np.ndarray, times: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """Each CSR row of ``values`` repeated ``times[row]`` times, rows in order: the row of
    each element and the element (``np.concatenate([np.tile(row, t) ...])`` without a loop).
    """
    lengths = np.diff(indptr)
    run, offset = ranges(lengths * times)
    return run, values[indptr[:-1][run] + offset % np.maximum(lengths[run], 1)]
