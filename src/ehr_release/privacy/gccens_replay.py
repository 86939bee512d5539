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

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np


class _Holders:
    """dis() by intersecting, per (code, count), the sorted population rows holding the code
    at least that many times — memoized per distinct record."""

    def __init__(self, population: Sequence[Mapping[str, int]], codes: set[str]) -> None:
        self.size = len(population)
        rows: dict[str, list[tuple[int, int]]] = {c: [] for c in codes}
        for i, record in enumerate(population):
            for code, n in record.items():
                if code in rows and n > 0:
                    rows[code].append((i, int(n)))
        self._rows = {c: (np.array([i for i, _ in v], dtype=np.int64),
                          np.array([n for _, n in v], dtype=np.int64)) for c, v in rows.items()}
        self._memo: dict[frozenset[tuple[str, int]], int] = {}

    def dis(self, record: Mapping[str, int]) -> int:
        items = frozenset(record.items())
        if items not in self._memo:
            rows: np.ndarray | None = None
            for code, n in sorted(items):
                ids, counts = self._rows[code]
                mine = ids[counts >= n]
                rows = mine if rows is None else np.intersect1d(rows, mine, assume_unique=True)
            self._memo[items] = self.size if rows is None else len(rows)
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
    # the clamp: a code's cap is the largest count still present (0 when none is)
    cap = {c: max((r.get(c, 0) for r in records), default=0) for c in cap}
    at_cap = {c: Counter(r[c] for r in records if c in r) for c in cap}  # count → records
    index = _Holders(population, set(cap))
    low = {i for i, r in enumerate(records) if index.dis(r) < k}
    while low:
        open_codes = [c for c in cap if cap[c] >= 1]
        if not open_codes:  # nothing left to censor: dis(∅) = |P| < k; k-map fails anyway
            break
        code = min(open_codes, key=lambda c: (at_cap[c][cap[c]], c))
        for i, record in enumerate(records):
            if record.get(code) == cap[code]:
                at_cap[code][cap[code]] -= 1
                record[code] -= 1
                if record[code]:
                    at_cap[code][record[code]] += 1
                else:
                    del record[code]
                if i in low and index.dis(record) >= k:
                    low.discard(i)
        cap[code] -= 1
    return records
