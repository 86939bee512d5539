"""Array joins the verifier's fast path is built from (sorted keys, CSR rows).

Written for the verifier alone: ``ehr_release.algorithms`` has helpers of its own and the two
sides share no code, so a mistake in one cannot hide the same mistake in the other.
"""

from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort: numpy's hash-based ``unique`` is far slower here).

    Values already strictly ascending (an extract sorted by patient and code) are returned
    as they are: one comparison instead of a sort and two copies of millions of keys.
    """
    if len(values) < 2 or (values[1:] > values[:-1]).all():
        return values
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def pairs_within(indptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions (i, j), i < j, of every pair of elements inside each CSR row.

    Rows are taken a length at a time: every row of length L has the same pairs of offsets,
    ``np.triu_indices(L, 1)``, shifted by the row's start. There are few distinct lengths,
    so this is a handful of broadcasts. The pairs come grouped by row length, not in row
    order; every caller counts or sums them, which does not depend on order.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    starts, lengths = indptr[:-1], np.diff(indptr)
    firsts: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    seconds: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    for length in np.unique(lengths[lengths >= 2]).tolist():
        row_starts = starts[lengths == length]
        i, j = np.triu_indices(length, 1)
        firsts.append((row_starts[:, None] + i[None, :]).ravel())
        seconds.append((row_starts[:, None] + j[None, :]).ravel())
    return np.concatenate(firsts), np.concatenate(seconds)


def row_pair_keys(indptr: np.ndarray, codes: np.ndarray, c: int,
                  row_base: np.ndarray | None = None) -> list[np.ndarray]:
    """Keys ``row_base[row] + codes[i]·c + codes[j]`` of every pair i < j of positions inside
    each CSR row (``row_base`` 0 when not given), one array per row length.

    The keys :func:`pairs_within` would index, with less memory traffic (the original of a
    million records has ~9 million pairs): rows of one length are gathered as one block of
    codes and the keys computed from its columns, without position arrays.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    starts, lengths = indptr[:-1], np.diff(indptr)
    blocks = []
    for length in np.unique(lengths[lengths >= 2]).tolist():
        rows = lengths == length
        block = codes[starts[rows][:, None] + np.arange(length)]
        i, j = np.triu_indices(length, 1)
        keys = block[:, i] * c + block[:, j]
        if row_base is not None:
            keys += row_base[rows][:, None]
        blocks.append(keys.ravel())
    return blocks


def counted(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_counts=True)``, sorting ``keys`` in place (a scratch array
    of the caller's: one copy of millions of keys fewer)."""
    if not len(keys):
        return keys.astype(np.int64), np.zeros(0, dtype=np.int64)
    keys.sort()
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[starts], np.diff(np.r_[starts, len(keys)])


def pair_counts(indptr: np.ndarray, codes: np.ndarray, c: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys ``codes[i]·c + codes[j]`` over every pair i < j of positions
    inside a CSR row (codes < ``c``), and how many rows hold each.

    When ``c²`` counters are few next to the pairs (a few hundred codes), each key is
    counted in place by ``bincount`` instead of sorted.
    """
    blocks = row_pair_keys(indptr, codes, c)
    n_pairs = sum(len(b) for b in blocks)
    if not n_pairs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if c * c > 4 * n_pairs + (1 << 16):  # many codes: sort the keys
        return counted(np.concatenate(blocks))
    counts = np.zeros(c * c, dtype=np.int64)
    for block in blocks:
        counts += np.bincount(block, minlength=c * c)
    keys = np.flatnonzero(counts)
    return keys, counts[keys]


def cross_within(group_a: np.ndarray, group_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with ``group_a[i] == group_b[j]``; ``group_b`` must be sorted."""
    lo = np.searchsorted(group_b, group_a, "left")
    count = np.searchsorted(group_b, group_a, "right") - lo
    ia = np.repeat(np.arange(len(group_a)), count)
    starts = np.cumsum(count) - count
    ib = np.repeat(lo, count) + np.arange(len(ia)) - np.repeat(starts, count)
    return ia, ib


def lookup(sorted_keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at ``query`` keys (0 where a key is absent)."""
    if not len(sorted_keys):
        return np.zeros(len(query), dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_keys, query), len(sorted_keys) - 1)
    return np.where(sorted_keys[pos] == query, values[pos], 0)
