"""GCCens' censoring, replayed: which instances a release censors is not the releaser's choice.

k-map, caps and "censoring only" bound the released records from one side: a release that
censors *more* than GCCens — one instance more on lines chosen by a hidden per-patient bit —
keeps them all and carries the bit (issue 32, part 2). The choice is not free, though: given
the sample, the population, k and the caps, GCCens is deterministic (spec
``03-repeated-longitudinal.md`` §1, with its decisions — codes with cap 0 are never
candidates, caps clamped to the largest count still present, ties to the lowest code in
string order — as the format declares them). So the verifier replays it, with code of its
own (it shares nothing with ``ehr_release.algorithms``: another loop, another dis()), and
requires each released record to be exactly the replayed one.

Needs no key: only the original sample and the population, which whoever re-verifies a
k-map release holds anyway (the site, or an auditor it shares them with).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


class _Holders:
    """dis() by filtering, rarest (code, count) first, the sorted population rows holding
    each code at least that many times — memoized per distinct record."""

    def __init__(self, population: Sequence[Mapping[str, int]], codes: set[str]) -> None:
        self.size = len(population)
        rows: dict[str, list[tuple[int, int]]] = {c: [] for c in codes}
        for i, record in enumerate(population):
            for code, n in record.items():
                if code in rows and n > 0:
                    rows[code].append((i, int(n)))
        self._rows = {c: (np.array([i for i, _ in v], dtype=np.int64),
                          np.array([n for _, n in v], dtype=np.int64)) for c, v in rows.items()}
        self._at_least: dict[tuple[str, int], np.ndarray] = {}
        self._memo: dict[frozenset[tuple[str, int]], int] = {}

    def _holding(self, code: str, n: int) -> np.ndarray:
        found = self._at_least.get((code, n))
        if found is None:
            ids, counts = self._rows[code]
            found = self._at_least[(code, n)] = ids[counts >= n]  # ids ascending
        return found

    def dis(self, record: Mapping[str, int]) -> int:
        items = frozenset(record.items())
        if items not in self._memo:
            keys = sorted((self._holding(c, n) for c, n in items), key=len)
            if not keys:
                self._memo[items] = self.size
            else:
                rows = keys[0]
                for other in keys[1:]:
                    if not len(rows):
                        break
                    at = np.minimum(np.searchsorted(other, rows), max(len(other) - 1, 0))
                    rows = rows[other[at] == rows] if len(other) else other
                self._memo[items] = len(rows)
        return self._memo[items]


def replay_censoring(sample: Sequence[Mapping[str, int]],
                     population: Sequence[Mapping[str, int]], k: int,
                     cap_of: Mapping[str, int | None]) -> list[dict[str, int]]:
    """What GCCens releases for each sample record (same order as ``sample``).

    ``cap_of`` gives each code's declared cap (None: no cap, i.e. the sample's maximum).
    """
    largest: dict[str, int] = {}
    for record in sample:
        for code, n in record.items():
            largest[code] = max(largest.get(code, 0), int(n))
    cap: dict[str, int] = {}
    for code, top in largest.items():
        declared = cap_of.get(code)
        cap[code] = top if declared is None else min(top, int(declared))
    records = [{c: min(int(n), cap[c]) for c, n in r.items() if min(int(n), cap[c]) > 0}
               for r in sample]
    exactly: dict[str, dict[int, set[int]]] = {c: {} for c in cap}  # code → count → rows
    for i, record in enumerate(records):
        for code, n in record.items():
            exactly[code].setdefault(n, set()).add(i)
    # the clamp: a code's cap is the largest count still present (0 when none is)
    cap = {c: max(exactly[c], default=0) for c in cap}
    index = _Holders(population, set(cap))
    low = {i for i, r in enumerate(records) if index.dis(r) < k}
    while low:
        open_codes = [c for c in cap if cap[c] >= 1]
        if not open_codes:  # nothing left to censor: dis(∅) = |P| < k; k-map fails anyway
            break
        code = min(open_codes, key=lambda c: (len(exactly[c].get(cap[c], ())), c))
        rows = exactly[code].pop(cap[code], set())
        cap[code] -= 1
        for i in rows:
            records[i][code] -= 1
            if records[i][code]:
                exactly[code].setdefault(cap[code], set()).add(i)
            else:
                del records[i][code]
        low -= {i for i in rows & low if index.dis(records[i]) >= k}
    return records
