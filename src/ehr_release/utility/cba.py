"""CBA, the comparator of the disassociation paper, run over the whole dataset.

The disassociation paper (Loukides et al., JBI 2014, §2 and §6) compares against the
Clustering-Based Anonymizer (CBA) of Loukides, Gkoulalas-Divanis and Malin, applied "with
the goal of thwarting identity disclosure based on all sets of m diagnosis codes" under the
same utility policy. CBA's listing (ITAB 2010, Algorithm 1):

```
PQ = privacy constraints (sets of codes) by support, largest first
while PQ: p = top of PQ  (generalized items of p read as their codes)
    while sup(p) < k:
        find im in p and is with im, is in one utility constraint and ILM(im ∪ is) minimal
        replace im and is by the generalized item (im, is) in p and in every record
    remove p from PQ
```

What this module fixes where the listing is silent (each a **Decision**, as in spec 01):

* Privacy constraints: the m-code subsets of the records and every record shorter than m
  (protecting them protects every set of ≤ m codes).
* ILM of a generalized item ĩ (Loukides et al., PNAS 2010) is
  ``(2^|ĩ| − 1)/(2^|T| − 1) · w(ĩ) · sup(ĩ)/N``; with unit weights only
  ``(2^|ĩ| − 1) · sup(ĩ)`` decides, ties to the smaller code list. Unlike GenDiag, which
  picks the smallest merged item, CBA prefers merging rare items.
* When no merge is left (the constraint of every item of p is one item already, or the
  codes are in no constraint), the least supported item of p is suppressed, as the paper
  says CBA does ("suppression is used when this requirement cannot be satisfied").

On the paper's Fig. 1 example (k = 3, m = 2) this gives what Fig. 3(a) describes for u1, u2
and u4 — the six codes of u1 become one generalized item, 692.71, 695.10 and 480.1 are
suppressed, every pair of published items is held by ≥ 3 records — but it keeps u5
({834.0, 944.01}, 5 records) and suppresses u3, where the paper keeps u3 (4 records) and
loses u5. Both are 3²-anonymous and one of the two must go (they meet in one record); the
listing does not say which, and the paper's own count ("7 out of 13 codes suppressed")
fits neither its prose nor any rule tried here. ``tests/test_cba.py`` pins both facts.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ehr_release.configuration.policies import UtilityPolicy
from ehr_release.utility.generalization_baseline import (
    GeneralizedData,
    InfrequentQueue,
    ItemState,
    repair,
)

Item = frozenset[str]


class CbaState(ItemState):
    """Generalized items whose merges are chosen by CBA's ILM."""

    def ilm(self, u: Item, other: Item) -> int:
        """``(2^|ĩ| − 1) · sup(ĩ)`` for ĩ = u ∪ other: ILM up to a constant factor."""
        return ((1 << len(u | other)) - 1) * (self.items[u] | self.items[other]).bit_count()

    def best_merge(self, items: set[Item]) -> tuple[Item, Item] | None:
        """The pair (im in ``items``, is in im's constraint) of least ILM, or None.

        Candidates are visited by a lower bound of their ILM, ``(2^|ĩ| − 1)·max(sup)``,
        so the exact (OR + popcount) value is computed only for the few that can win.
        """
        candidates: list[tuple[int, tuple[str, ...], Item, Item]] = []
        for u in items:
            c = self.constraint_of.get(next(iter(u)))
            if c is None:
                continue
            for other in self.in_constraint[c]:
                if other != u:
                    merged = u | other
                    bound = ((1 << len(merged)) - 1) * max(self.support[u], self.support[other])
                    candidates.append((bound, tuple(sorted(merged)), u, other))
        candidates.sort(key=lambda x: (x[0], x[1]))
        best: tuple[int, tuple[str, ...], Item, Item] | None = None
        for bound, codes, u, other in candidates:
            if best is not None and bound > best[0]:
                break
            key = (self.ilm(u, other), codes)
            if best is None or key < best[:2]:
                best = (key[0], codes, u, other)
        return None if best is None else (best[2], best[3])


def cba(code_sets: Sequence[Collection[str]], policy: UtilityPolicy, k: int, m: int, *,
        bits: dict[str, int] | None = None) -> GeneralizedData:
    """Make every m-code set of the records held by ≥ k records, the CBA way.

    Parameters
    ----------
    code_sets
        One set of codes per record.
    policy
        Utility constraints: a generalized item never mixes two constraints; codes in no
        constraint can only be kept as they are or suppressed.
    k, m
        Privacy: every set of ≤ m codes of a record ends up held by ≥ k records (or
        suppressed).
    bits
        Code → record bitset of ``code_sets``, when the caller has it already.

    Returns
    -------
    GeneralizedData
        The generalized items with their records, and the suppressed codes.
    """
    state = CbaState(code_sets, policy, bits)
    return repair(state, InfrequentQueue(code_sets, state, k, m, maximal=True), k)
