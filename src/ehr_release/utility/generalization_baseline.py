"""GenDiag over the whole dataset: the ArtUC paper's adaptation of CBA, kept as a comparator.

GenDiag (spec 02; Poulis et al., ArtUC paper, Appendix A) is the ArtUC paper's adaptation
of CBA: it replaces codes with *generalized items* (sets of codes of one utility constraint,
read as "some non-empty subset of these") to make *every* itemset of ≤ m codes k-anonymous,
merging the pair of items with the smallest generalized item, and suppresses what cannot be
generalized. It is **not** CBA, the comparator of the disassociation paper: CBA
(:mod:`ehr_release.utility.cba`) protects the m-code sets of the records only and chooses
merges by the information-loss metric ILM, which weighs the merged item's support. This
module also holds what both share: :class:`GeneralizedData` (answering queries on a
generalized dataset), :class:`ItemState` (items as record bitsets) and the repair loop.

Supports are popcounts of Python-int bitsets over records, so merging two items is an OR and
the support of an itemset an AND.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ehr_release.configuration.policies import UtilityPolicy
from ehr_release.utility.bitsets import code_bitsets


@dataclass(frozen=True)
class GeneralizedData:
    """The result of GenDiag: alive generalized items with their record bitsets."""

    n_records: int
    items: dict[frozenset[str], int]
    item_of: dict[str, frozenset[str]]
    suppressed: frozenset[str]

    @property
    def suppressed_count(self) -> int:
        return len(self.suppressed)

    def estimate(self, query: Iterable[str]) -> float:
        """Expected number of records holding every code of ``query`` (uniform assumption).

        A generalized item ũ stands for any non-empty subset of its codes, each equally
        likely, so it holds j given codes with probability 2^(|ũ|−j) / (2^|ũ| − 1).
        A query naming a suppressed code cannot be answered: 0.
        """
        needed: Counter[frozenset[str]] = Counter()
        for code in set(query):
            if code in self.suppressed or code not in self.item_of:
                return 0.0
            needed[self.item_of[code]] += 1
        together = -1
        probability = 1.0
        for item, j in needed.items():
            together &= self.items[item]
            probability *= 2.0 ** -j / (1.0 - 2.0 ** -len(item))
        return 0.0 if together == -1 else together.bit_count() * probability

    def matches(self, constraint: Collection[str]) -> int:
        """Records holding at least one (generalized) code of ``constraint``."""
        union = 0
        for item in {self.item_of[c] for c in constraint if c in self.item_of}:
            union |= self.items[item]
        return union.bit_count()


class ItemState:
    """Generalized items of one run (GenDiag or CBA) as record bitsets.

    Starts with every code its own item; :meth:`merge` and :meth:`suppress` change the
    items, :meth:`best_merge` is GenDiag's choice (smallest merged item) and is what CBA
    overrides.
    """

    def __init__(self, code_sets: Sequence[Collection[str]], policy: UtilityPolicy,
                 bits: dict[str, int] | None = None) -> None:
        self.n = len(code_sets)
        bits = bits if bits is not None else code_bitsets(code_sets)
        self.items: dict[frozenset[str], int] = {frozenset([c]): b for c, b in bits.items()}
        self.support = {item: b.bit_count() for item, b in self.items.items()}
        self.item_of: dict[str, frozenset[str]] = {c: frozenset([c]) for c in bits}
        self.constraint_of = policy.constraint_of()
        self.in_constraint: dict[int, set[frozenset[str]]] = {}
        for item in self.items:
            c = self.constraint_of.get(next(iter(item)))
            if c is not None:
                self.in_constraint.setdefault(c, set()).add(item)
        self.suppressed: set[str] = set()

    def current(self, codes: Iterable[str]) -> set[frozenset[str]]:
        return {self.item_of[c] for c in codes if c not in self.suppressed}

    def itemset_support(self, items: Iterable[frozenset[str]]) -> int:
        together = -1
        for item in items:
            together &= self.items[item]
        return self.n if together == -1 else together.bit_count()

    def best_merge(self, items: set[frozenset[str]]
                   ) -> tuple[frozenset[str], frozenset[str]] | None:
        best: tuple[tuple[int, int, tuple[str, ...]], frozenset[str], frozenset[str]] | None = None
        for u in items:
            c = self.constraint_of.get(next(iter(u)))
            if c is None:
                continue
            for other in self.in_constraint[c]:
                if other == u:
                    continue
                merged = u | other
                key = (len(merged), -self.support[other], tuple(sorted(merged)))
                if best is None or key < best[0]:
                    best = (key, u, other)
        return None if best is None else (best[1], best[2])

    def merge(self, u: frozenset[str], other: frozenset[str]) -> None:
        merged = u | other
        bits = self.items.pop(u) | self.items.pop(other)
        self.items[merged] = bits
        self.support[merged] = bits.bit_count()
        group = self.in_constraint[self.constraint_of[next(iter(u))]]
        group -= {u, other}
        group.add(merged)
        for code in merged:
            self.item_of[code] = merged

    def suppress(self, items: set[frozenset[str]]) -> None:
        victim = min(items, key=lambda it: (self.support[it], tuple(sorted(it))))
        self.items.pop(victim)
        c = self.constraint_of.get(next(iter(victim)))
        if c is not None:
            self.in_constraint[c].discard(victim)
        self.suppressed |= victim
        for code in victim:
            del self.item_of[code]


def gendiag(code_sets: Sequence[Collection[str]], policy: UtilityPolicy, k: int,
            m: int, *, bits: dict[str, int] | None = None) -> GeneralizedData:
    """Make all records k^m-anonymous by generalizing within constraints, else suppressing.

    Follows spec 02's GenDiag: itemsets of ≤ m codes with support below k are repaired in
    order of decreasing support; each is fixed by merging one of its items with the item of
    the same constraint that gives the smallest merged item (ties: higher support, then
    codes), or, when no merge is possible, by suppressing its least supported item.
    Supports only grow as items merge or shrink, so a lazy max-heap keeps the order exact.
    ``bits`` (code → record bitset of ``code_sets``) saves recomputing them.
    """
    state = ItemState(code_sets, policy, bits)
    return repair(state, InfrequentQueue(code_sets, state, k, m), k)


def repair(state: ItemState, queue: InfrequentQueue, k: int) -> GeneralizedData:
    """Protect every queued itemset in turn: merge within constraints, else suppress.

    The loop both GenDiag and CBA run (ITAB 2010 CBA listing, steps 3–16; ArtUC paper,
    GenDiag steps 3–14): pop the itemset with the largest support below k; while it is
    held by fewer than k records, apply ``state.best_merge`` or, when no merge is left,
    suppress its least supported item.
    """
    while (entry := queue.pop()) is not None:
        stored, itemset = entry
        items = state.current(itemset)
        support = state.itemset_support(items)
        if support >= k or not items:
            continue
        if support != -stored:
            queue.push((-support, itemset))
            continue
        while items and support < k:
            pair = state.best_merge(items)
            if pair is not None:
                state.merge(*pair)
            else:
                state.suppress(items)
            items = state.current(itemset)
            support = state.itemset_support(items)
    return GeneralizedData(state.n, dict(state.items), dict(state.item_of),
                           frozenset(state.suppressed))


class InfrequentQueue:
    """Itemsets of ≤ m codes with support < k, popped by (−support, codes) ascending.

    ``maximal=True`` keeps only the privacy constraints CBA is given in the disassociation
    paper ("all sets of m diagnosis codes"): the m-code subsets of the records, and a whole
    record when it holds fewer than m codes. Every itemset of ≤ m codes of a record lies
    inside one of them, so protecting these protects all (supports only shrink with size).

    The initial itemsets are counted with NumPy (pairs of code ranks within each record)
    and sorted once into arrays; only itemsets whose support changed are pushed back, onto a
    small heap merged with the sorted arrays at each pop. Code ranks follow code order, so
    rank rows padded with −1 sort exactly like the code tuples (a prefix first).
    """

    def __init__(self, code_sets: Sequence[Collection[str]], state: ItemState, k: int,
                 m: int, *, maximal: bool = False) -> None:
        self.names = sorted(state.item_of)  # before any merge: every code its own item
        rank = {c: i for i, c in enumerate(self.names)}
        single = np.array([state.support[state.item_of[c]] for c in self.names],
                          dtype=np.int64)
        rows = [np.c_[np.arange(len(self.names)), np.full((len(self.names), m - 1), -1)]]
        counts = [single]
        if m >= 2:
            pairs, n_pairs = _pair_counts(code_sets, rank)
            rows.append(np.c_[pairs, np.full((len(pairs), m - 2), -1, dtype=np.int64)])
            counts.append(n_pairs)
        for size in range(3, m + 1):
            found: Counter[tuple[int, ...]] = Counter()
            for codes in code_sets:
                found.update(combinations(sorted(rank[c] for c in codes), size))
            keys = list(found)
            arr = np.array(keys, dtype=np.int64).reshape(-1, size)
            rows.append(np.c_[arr, np.full((len(arr), m - size), -1, dtype=np.int64)])
            counts.append(np.array([found[x] for x in keys], dtype=np.int64))
        matrix, count = np.concatenate(rows), np.concatenate(counts)
        keep = count < k
        if maximal:
            keep &= self._maximal(matrix, code_sets, rank, m)
        matrix, count = matrix[keep], count[keep]
        order = np.lexsort([matrix[:, j] for j in range(m - 1, -1, -1)] + [-count])
        self.rows, self.counts = matrix[order], count[order]
        self.next = 0
        self.heap: list[tuple[int, tuple[str, ...]]] = []

    @staticmethod
    def _maximal(matrix: np.ndarray, code_sets: Sequence[Collection[str]],
                 rank: dict[str, int], m: int) -> np.ndarray:
        """Rows that are m-code sets or exactly the code set of a record shorter than m."""
        sizes = (matrix >= 0).sum(axis=1)
        keep = sizes == m
        short = {tuple(sorted(rank[c] for c in s)) for s in code_sets if 0 < len(s) < m}
        for i in np.flatnonzero(~keep).tolist():
            keep[i] = tuple(x for x in matrix[i].tolist() if x >= 0) in short
        return keep

    def _static(self) -> tuple[int, tuple[str, ...]] | None:
        if self.next >= len(self.rows):
            return None
        row = self.rows[self.next]
        return -int(self.counts[self.next]), tuple(self.names[i] for i in row.tolist() if i >= 0)

    def pop(self) -> tuple[int, tuple[str, ...]] | None:
        static = self._static()
        if self.heap and (static is None or self.heap[0] < static):
            return heapq.heappop(self.heap)
        self.next += static is not None
        return static

    def push(self, entry: tuple[int, tuple[str, ...]]) -> None:
        heapq.heappush(self.heap, entry)


def _pair_counts(code_sets: Sequence[Collection[str]],
                 rank: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of code ranks held together (rows ``[a, b]``, a < b) and its support."""
    lengths = np.fromiter((len(s) for s in code_sets), dtype=np.int64, count=len(code_sets))
    ids = np.fromiter((rank[c] for s in code_sets for c in s), dtype=np.int64,
                      count=int(lengths.sum()))
    owner = np.repeat(np.arange(len(code_sets), dtype=np.int64), lengths)
    ids = ids[np.lexsort((ids, owner))]
    end = np.repeat(np.cumsum(lengths), lengths)  # one past each occurrence's record
    width = max(len(rank), 1)
    keys = []
    for gap in range(1, int(lengths.max(initial=0))):
        at = np.flatnonzero(np.arange(len(ids)) + gap < end)
        keys.append(ids[at] * width + ids[at + gap])
    if not keys:
        return np.empty((0, 2), dtype=np.int64), np.empty(0, dtype=np.int64)
    pair, count = np.unique(np.concatenate(keys), return_counts=True)
    return np.c_[pair // width, pair % width], count
