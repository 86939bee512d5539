"""Distinguishability of code multisets against a population, without scanning it.

dis(D) is the number of population records that contain the multiset D: for every code d of
D, the record holds d at least count_D(d) times. The population can be large (301,423
records in the thesis) and GCCens asks for dis() after every censoring step, so the
population is indexed once: for each (code, count) key the records holding the code at
least that many times. Frequent keys are stored as bitsets (fast AND + popcount); rare keys
as sorted record numbers (memory proportional to their size). A record's dis() intersects
its keys, rarest first, and is memoized per distinct multiset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

Multiset = Mapping[str, int]

#: A key whose holders exceed this share of the population is stored as a bitset: beyond
#: 1/32 a sorted int32 list costs more memory than one bit per record.
DENSE_SHARE = 1 / 32


class PopulationIndex:
    """Inverted index (code, count) → population records holding the code ≥ count times.

    Parameters
    ----------
    population
        One multiset (code → count) per population record.
    codes
        Only these codes are indexed (the ones a released record can hold); all codes of
        the population when omitted. A multiset holding an unindexed code has dis 0.

    Examples
    --------
    >>> idx = PopulationIndex([{"250": 2}, {"250": 1, "272": 1}, {"272": 2}])
    >>> idx.dis({"250": 1}), idx.dis({"272": 2}), idx.dis({})
    (2, 1, 3)
    """

    def __init__(self, population: Sequence[Multiset], codes: Iterable[str] | None = None):
        self.size = len(population)
        self._words = (self.size + 63) // 64
        wanted = None if codes is None else set(codes)
        rows: dict[str, list[int]] = {}
        counts: dict[str, list[int]] = {}
        for i, record in enumerate(population):
            for code, n in record.items():
                if n > 0 and (wanted is None or code in wanted):
                    rows.setdefault(code, []).append(i)
                    counts.setdefault(code, []).append(n)
        self._holders: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for code, idx in rows.items():
            n = np.asarray(counts[code], dtype=np.int64)
            order = np.argsort(-n, kind="stable")
            self._holders[code] = (np.asarray(idx, dtype=np.int32)[order], n[order])
        self._keys: dict[tuple[str, int], np.ndarray] = {}
        self._memo: dict[frozenset[tuple[str, int]], int] = {}

    # ------------------------------------------------------------------ keys
    def _key(self, code: str, count: int) -> np.ndarray:
        """Sorted int32 record numbers, or a uint64 bitset, of holders of code ≥ count."""
        found = self._keys.get((code, count))
        if found is not None:
            return found
        holders = self._holders.get(code)
        if holders is None:
            rows = np.empty(0, dtype=np.int32)
        else:
            idx, n = holders  # n sorted descending: holders ≥ count are a prefix
            rows = np.sort(idx[: int(np.searchsorted(-n, -count, side="right"))])
        if len(rows) > DENSE_SHARE * self.size:
            mask = np.zeros(self._words * 64, dtype=bool)
            mask[rows] = True
            value = np.packbits(mask, bitorder="little").view(np.uint64)
        else:
            value = rows
        self._keys[(code, count)] = value
        return value

    def holders(self, code: str, count: int) -> int:
        """How many population records hold ``code`` at least ``count`` times."""
        key = self._key(code, count)
        return int(np.bitwise_count(key).sum()) if key.dtype == np.uint64 else len(key)

    # ------------------------------------------------------------------ dis
    def dis(self, record: Multiset) -> int:
        """Number of population records containing ``record`` (multiset containment)."""
        items = frozenset((c, int(n)) for c, n in record.items() if n > 0)
        found = self._memo.get(items)
        if found is None:
            found = self._memo[items] = self._intersect(items)
        return found

    def _intersect(self, items: frozenset[tuple[str, int]]) -> int:
        if not items:
            return self.size
        keys = [self._key(c, n) for c, n in items]
        sparse = sorted((k for k in keys if k.dtype != np.uint64), key=len)
        dense = [k for k in keys if k.dtype == np.uint64]
        if not sparse:
            acc = dense[0].copy()
            for bits in dense[1:]:
                np.bitwise_and(acc, bits, out=acc)
            return int(np.bitwise_count(acc).sum())
        cand = sparse[0]
        for rows in sparse[1:]:
            if not len(cand):
                return 0
            pos = np.minimum(np.searchsorted(rows, cand), len(rows) - 1)
            cand = cand[rows[pos] == cand] if len(rows) else cand[:0]
        for bits in dense:
            if not len(cand):
                return 0
            word = bits[cand >> 6]
            cand = cand[((word >> (cand & 63).astype(np.uint64)) & np.uint64(1)).astype(bool)]
        return len(cand)
