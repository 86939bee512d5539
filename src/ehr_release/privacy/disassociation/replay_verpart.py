"""VerPart, replayed from the spec: a cluster's record-chunk domains and their order.

Which codes share a record chunk, and the chunks' order, are not the releaser's choice.
VerPart (spec ``01-disassociation.md``, "VerPart") is deterministic under the rules the
format documents (field ``chunk``):

* codes held by fewer than k records of the cluster go to the item chunk;
* the others are ordered: the codes of one utility constraint together, each constraint's
  codes by support (descending) then string order, constraints by the support of their
  first code (descending) then that code's string order; a code in no constraint is a
  constraint of its own;
* each pass walks the remaining codes in that order and adds every code that keeps the chunk
  k^m-anonymous (each itemset of ≤ m of its codes held by 0 or ≥ k records); then gives back
  every added code whose constraint is not the first added code's and does not have all its
  remaining codes in the chunk (the spec's negated reading); the chunk is numbered by its
  pass.

The verifier's own code (nothing shared with ``ehr_release.algorithms``): the records
holding each code are a Python integer used as a bit set over the cluster's records, and an
itemset's support is the popcount of their intersection.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import chain, combinations

Row = tuple[int, ...]


def _order(support: Counter[int], frequent: list[int], constraint_of: Sequence[int]
           ) -> list[int]:
    """The frequent codes in the documented order (module doc)."""
    groups: dict[object, list[int]] = {}
    for code in frequent:
        c = constraint_of[code]
        groups.setdefault(c if c >= 0 else ("alone", code), []).append(code)
    ranked = [sorted(g, key=lambda t: (-support[t], t)) for g in groups.values()]
    ranked.sort(key=lambda g: (-support[g[0]], g[0]))
    return [t for g in ranked for t in g]


def _still_anonymous(chunk: list[int], code: int, holders: dict[int, int], k: int,
                     m: int) -> bool:
    """Is ``chunk`` + ``code`` k^m-anonymous, ``chunk`` being so? Only itemsets with
    ``code`` are new; ``{code}`` itself is held by ≥ k records (a frequent code)."""
    for size in range(1, min(m - 1, len(chunk)) + 1):
        for others in combinations(chunk, size):
            together = holders[code]
            for other in others:
                together &= holders[other]
            if 0 < together.bit_count() < k:
                return False
    return True


def _anonymous_together(rows: Sequence[Row], frequent: set[int], k: int, m: int) -> bool:
    """Are all the frequent codes, as one chunk, k^m-anonymous? Then every code tried keeps
    the chunk so (its itemsets are among these) and no constraint is torn: VerPart makes
    that one chunk, and the passes need not run (most clusters)."""
    counts: Counter[tuple[int, ...]] = Counter()
    for row in rows:
        mine = [t for t in row if t in frequent]
        for size in range(2, min(m, len(mine)) + 1):
            counts.update(combinations(mine, size))
    return all(n >= k for n in counts.values())


def verpart(rows: Sequence[Row], k: int, m: int, constraint_of: Sequence[int]
            ) -> tuple[list[list[int]], dict[int, int]]:
    """(record-chunk domains in order, item-chunk code → support) of one cluster (or of a
    joint cluster's records projected onto its candidate codes)."""
    support: Counter[int] = Counter(chain.from_iterable(rows))
    items = {t: n for t, n in support.items() if n < k}
    remaining = _order(support, [t for t, n in support.items() if n >= k], constraint_of)
    if len(remaining) <= 1 or _anonymous_together(rows, set(remaining), k, m):
        return ([remaining] if remaining else []), items
    holders = dict.fromkeys(remaining, 0)
    for i, row in enumerate(rows):
        for t in row:
            if t in holders:
                holders[t] |= 1 << i
    domains: list[list[int]] = []
    while remaining:
        chunk: list[int] = []
        for code in remaining:
            if _still_anonymous(chunk, code, holders, k, m):
                chunk.append(code)
        first = constraint_of[chunk[0]]
        left = Counter(constraint_of[t] for t in remaining)
        got = Counter(constraint_of[t] for t in chunk)
        chunk = [t for t in chunk if constraint_of[t] < 0 or constraint_of[t] == first
                 or got[constraint_of[t]] == left[constraint_of[t]]]
        domains.append(chunk)
        placed = set(chunk)
        remaining = [t for t in remaining if t not in placed]
    return domains, items
