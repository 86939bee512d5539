"""Records as bits of a Python int per code: AND gives an itemset's records, popcount its count.

Exact counting on a plain dataset (the original, or a reconstruction) for the utility
workloads: a query is a handful of ANDs over n-bit integers, whatever n is.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import pandas as pd


def bitsets_from_pairs(n_records: int, record: np.ndarray, code: np.ndarray,
                       names: Sequence[str]) -> dict[str, int]:
    """``names[c]`` → bitset of the records paired with code id ``c`` (codes with none left out).

    One sort groups the pairs by code; each code's bits are set into a byte buffer
    (n/8 bytes touched per code, not a boolean mask of n).
    """
    order = np.argsort(code, kind="stable")
    bounds = np.searchsorted(code[order], np.arange(len(names) + 1))
    buffer = np.zeros((n_records + 7) // 8, dtype=np.uint8)
    out: dict[str, int] = {}
    for c in np.flatnonzero(np.diff(bounds)).tolist():
        at = record[order[bounds[c]:bounds[c + 1]]]
        np.bitwise_or.at(buffer, at >> 3, np.left_shift(1, at & 7).astype(np.uint8))
        out[names[c]] = int.from_bytes(buffer.tobytes(), "little")
        buffer[at >> 3] = 0
    return out


def code_bitsets(code_sets: Sequence[Collection[str]]) -> dict[str, int]:
    """Code → bitset (Python int) of the records holding it."""
    lengths = np.fromiter((len(s) for s in code_sets), dtype=np.int64, count=len(code_sets))
    ids, uniques = pd.factorize(np.fromiter((c for s in code_sets for c in s), dtype=object,
                                            count=int(lengths.sum())))
    owners = np.repeat(np.arange(len(code_sets), dtype=np.int64), lengths)
    return bitsets_from_pairs(len(code_sets), owners, ids.astype(np.int64), list(uniques))
