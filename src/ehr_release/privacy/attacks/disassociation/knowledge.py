"""Which knowledge sets the attack evaluates for m > 2: all of them when there are at most
:data:`~ehr_release.privacy.attacks.EXHAUSTIVE_LIMIT`, otherwise a seeded sample plus every
set built only from rare codes."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations
from math import comb

import numpy as np

from ehr_release.privacy.attacks import EXHAUSTIVE_LIMIT, MIN_SAMPLED
from ehr_release.privacy.attacks.disassociation.order_test import SEED


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

