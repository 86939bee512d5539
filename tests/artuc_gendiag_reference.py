"""FROZEN REFERENCE (test-only): GenDiag as it was before the speed-up, kept verbatim.

tests/test_artuc_gendiag_equivalence.py checks the production GenDiag returns exactly what
this copy returns. Do not edit it to follow production changes.

GenDiag: make one cluster k^m-anonymous by set-generalizing and suppressing codes.

The adapted CBA of the paper's Appendix A, with the ties it leaves open fixed so runs are
reproducible:

* Q is processed by support (desc), then smaller itemsets first, then item ids;
* the generalization partner minimizes ``UL(u ∪ u')`` (= its size, code weights being 1),
  then prefers the better-supported ``u'``, then the lexicographically smaller codes;
* a merged item keeps the id of the better-supported part (ties: the smaller id);
* suppression removes the least-supported item of p (ties: smaller codes).

Why two Q strategies: the paper materializes every infrequent ≤m-itemset (``FullQueue``),
which for m = 2 means a hundred thousand pairs per large cluster. With the tie rule "smaller
itemsets first", a pair is never selected while one of its items is still infrequent (that
item has at least the pair's support and would be selected first), so for m ≤ 2 it suffices
to track infrequent items and infrequent pairs of *frequent* items (``BorderQueue``). Both
select the same itemset at every step; the tests check they produce identical output.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ehr_release.algorithms.artuc.codes import CodeTable


@dataclass(frozen=True)
class CodeGeneralization:
    """GenDiag's output for one cluster.

    ``rec``/``code``/``item`` list every code occurrence: local record position, code id,
    and the item (generalized code) that now stands for it (−1: suppressed). ``items`` maps
    item id → its sorted code ids. ``ul`` is Σ UL(r) over the cluster, split into the
    generalization part and the suppression part (Σ s(r)); ``suppressed`` counts the codes
    of suppressed items (the quantity bounded by ε).
    """

    rows: np.ndarray
    rec: np.ndarray
    code: np.ndarray
    item: np.ndarray
    items: dict[int, tuple[int, ...]]
    ul_generalization: float
    ul_suppression: float
    suppressed: int

    @property
    def ul(self) -> float:
        return self.ul_generalization + self.ul_suppression


def record_ul(n: int, rec: np.ndarray, item: np.ndarray,
              size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record: Σ_ũ UL(ũ) / (2^σ − 1) and s(r) (Def. 5–6, code weights 1).

    ``size[item]`` is |ũ|; singletons cost 0. Written as 2^(|ũ|−σ)·(1−2^−|ũ|)/(1−2^−σ) so
    generalized codes of hundreds of codes do not overflow.
    """
    kept = item >= 0
    width = int(item.max()) + 1 if len(item) else 1
    pairs = np.unique(rec[kept] * width + item[kept])
    owner, z = pairs // width, size[pairs % width].astype(float)
    sigma = np.bincount(owner, weights=z, minlength=n)
    term = np.where(z >= 2, np.exp2(z - sigma[owner]) * (1 - np.exp2(-z)), 0.0)
    num = np.bincount(owner, weights=term, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        gen = np.where(sigma > 0, num / (1 - np.exp2(-sigma)), 0.0)
    return gen, np.bincount(rec[~kept], minlength=n).astype(float)


def gendiag(table: CodeTable, rows: np.ndarray, k: int, m: int, *,
            full_queue: bool = False) -> CodeGeneralization:
    """Run GenDiag on the records ``rows`` (dataset row indices) of one cluster."""
    rec, code = table.gather(rows)
    uniq, local = np.unique(code, return_inverse=True)
    state = _Items(len(rows), rec, local, table.code_set[uniq])
    queue = (FullQueue if full_queue or m > 2 else BorderQueue)(state, k, m, rec, local)
    queue.run()
    roots = np.array([state.find(i) for i in range(len(uniq))], dtype=np.int64)
    label = np.where(np.array(state.suppressed, dtype=bool)[roots], -1, roots)
    item = label[local]
    items: dict[int, list[int]] = {}
    for i, lab in enumerate(label.tolist()):
        if lab >= 0:
            items.setdefault(lab, []).append(int(uniq[i]))
    size = np.zeros(len(uniq), dtype=np.int64)
    for lab, codes in items.items():
        size[lab] = len(codes)
    gen, sup = record_ul(len(rows), rec, item, size)
    return CodeGeneralization(rows, rec, code, item, {i: tuple(c) for i, c in items.items()},
                              float(gen.sum()), float(sup.sum()), state.suppressed_codes)


# --------------------------------------------------------------------------- item state
def _set_bits(x: int, nbytes: int) -> list[int]:
    if x.bit_count() <= 24:
        out = []
        while x:
            low = x & -x
            out.append(low.bit_length() - 1)
            x ^= low
        return out
    raw = np.frombuffer(x.to_bytes(nbytes, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()


class _Items:
    """Items of one cluster: bitset postings over its records, sizes, code sets, partners."""

    def __init__(self, n: int, rec: np.ndarray, local: np.ndarray, code_set: np.ndarray):
        d = len(code_set)
        self.nbytes = (n + 7) // 8
        self.post = [0] * d
        order = np.argsort(local, kind="stable")
        bounds = np.searchsorted(local[order], np.arange(d + 1))
        recs = rec[order]
        for i in range(d):
            members = recs[bounds[i]:bounds[i + 1]]
            if len(members) <= 24:
                self.post[i] = sum(1 << int(r) for r in members)
            else:
                bits = np.zeros(self.nbytes * 8, dtype=np.uint8)
                bits[members] = 1
                self.post[i] = int.from_bytes(np.packbits(bits, bitorder="little").tobytes(),
                                              "little")
        self.sup = np.diff(bounds).tolist()
        self.size = [1] * d
        self.mincode = list(range(d))
        self.alive = [True] * d
        self.suppressed = [False] * d
        self.parent = list(range(d))
        self.code_set = code_set.tolist()
        self.suppressed_codes = 0
        self.partners: dict[int, list[tuple[int, int, int, int]]] = {}
        for i in range(d):
            self.partners.setdefault(self.code_set[i], []).append((1, -self.sup[i], i, i))
        for heap in self.partners.values():
            heapq.heapify(heap)

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def records(self, x: int) -> list[int]:
        return _set_bits(x, self.nbytes)

    def _valid(self, entry: tuple[int, int, int, int]) -> bool:
        i = entry[3]
        return self.alive[i] and self.size[i] == entry[0] and self.sup[i] == -entry[1]

    def best_partner(self, u: int) -> int | None:
        """The smallest item of u's code set other than u (ties: support, then codes)."""
        heap = self.partners[self.code_set[u]]
        while heap and not self._valid(heap[0]):
            heapq.heappop(heap)
        if not heap:
            return None
        if heap[0][3] != u:
            return heap[0][3]
        mine = heapq.heappop(heap)
        while heap and not self._valid(heap[0]):
            heapq.heappop(heap)
        found = heap[0][3] if heap else None
        heapq.heappush(heap, mine)
        return found

    def merge(self, u: int, v: int) -> tuple[int, int, int]:
        """Replace u and v by their union; returns (survivor, absorbed, absorbed-only bits)."""
        s, o = (u, v) if (self.sup[u], -u) >= (self.sup[v], -v) else (v, u)
        delta = self.post[o] & ~self.post[s]
        self.post[s] |= self.post[o]
        self.sup[s] = self.post[s].bit_count()
        self.size[s] += self.size[o]
        self.mincode[s] = min(self.mincode[s], self.mincode[o])
        self.alive[o] = False
        self.parent[o] = s
        heapq.heappush(self.partners[self.code_set[s]],
                       (self.size[s], -self.sup[s], self.mincode[s], s))
        return s, o, delta

    def suppress(self, e: int) -> None:
        self.alive[e] = False
        self.suppressed[e] = True
        self.suppressed_codes += self.size[e]

    def support(self, p: list[int]) -> int:
        if len(p) == 1:
            return self.sup[p[0]]
        acc = self.post[p[0]]
        for x in p[1:]:
            acc &= self.post[x]
        return acc.bit_count()


# --------------------------------------------------------------------------- queues
class _Queue:
    """The outer loop of GenDiag; subclasses decide which itemsets are tracked in Q."""

    def __init__(self, state: _Items, k: int, m: int, rec: np.ndarray, local: np.ndarray):
        self.s, self.k, self.m = state, k, m
        self.heap: list[tuple[int, int, tuple[int, ...]]] = []

    def push(self, p: tuple[int, ...], support: int) -> None:
        heapq.heappush(self.heap, (-support, len(p), p))

    def run(self) -> None:
        s = self.s
        while self.heap:
            neg, _, p = heapq.heappop(self.heap)
            if not all(s.alive[x] for x in p):
                continue
            current = s.support(list(p))
            if current != -neg or current >= self.k:
                continue
            self.fix(list(p))

    def fix(self, p: list[int]) -> None:
        """Lines 5–13: generalize (or suppress) items of p until p has support ≥ k."""
        s = self.s
        while p and s.support(p) < self.k:
            best: tuple[tuple[int, int, int, int], int, int] | None = None
            for u in p:
                v = s.best_partner(u)
                if v is not None:
                    key = (s.size[u] + s.size[v], -s.sup[v], s.mincode[v], s.mincode[u])
                    if best is None or key < best[0]:
                        best = (key, u, v)
            if best is not None:
                _, u, v = best
                keep, gone, delta = s.merge(u, v)
                p = sorted({keep if x in (u, v) else x for x in p})
                self.merged(keep, gone, delta)
            else:
                e = min(p, key=lambda x: (s.sup[x], s.mincode[x]))
                self.suppressed(e)
                s.suppress(e)
                p.remove(e)

    def merged(self, keep: int, gone: int, delta: int) -> None:
        raise NotImplementedError

    def suppressed(self, e: int) -> None:
        raise NotImplementedError


class BorderQueue(_Queue):
    """Q restricted to infrequent items and infrequent pairs of frequent items (m ≤ 2)."""

    def __init__(self, state: _Items, k: int, m: int, rec: np.ndarray, local: np.ndarray):
        super().__init__(state, k, m, rec, local)
        sup = np.array(state.sup, dtype=np.int64)
        entries = [(-int(c), 1, (int(i),)) for i, c in enumerate(sup) if c < k]
        self.items_of: list[set[int]] = []
        if m >= 2:
            self.items_of = [set() for _ in range(int(rec.max(initial=-1)) + 1)]
            for r, c in zip(rec.tolist(), local.tolist(), strict=True):
                self.items_of[r].add(c)
            entries.extend(self._frequent_pairs(rec, local, sup >= k))
        heapq.heapify(entries)
        self.heap = entries

    def _frequent_pairs(self, rec: np.ndarray, local: np.ndarray,
                        frequent: np.ndarray) -> list[tuple[int, int, tuple[int, ...]]]:
        keep = frequent[local]
        r, c = rec[keep], local[keep]
        order = np.lexsort((c, r))
        r, c = r[order], c[order]
        starts = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
        lens = np.diff(np.r_[starts, len(r)])
        firsts, seconds = [], []
        for length in np.unique(lens):
            if length < 2:
                continue
            base = starts[lens == length]
            a, b = np.triu_indices(int(length), 1)
            firsts.append((base[:, None] + a).ravel())
            seconds.append((base[:, None] + b).ravel())
        if not firsts:
            return []
        d = len(frequent)
        keys = c[np.concatenate(firsts)] * d + c[np.concatenate(seconds)]
        uniq, counts = np.unique(keys, return_counts=True)
        rare = counts < self.k
        return [(-int(n), 2, (int(key // d), int(key % d)))
                for key, n in zip(uniq[rare], counts[rare], strict=True)]

    def merged(self, keep: int, gone: int, delta: int) -> None:
        s = self.s
        if self.m >= 2:
            for r in s.records(s.post[gone]):
                items = self.items_of[r]
                items.discard(gone)
                items.add(keep)
        if s.sup[keep] < self.k:
            self.push((keep,), s.sup[keep])
            return
        if self.m < 2:
            return
        was_frequent = s.sup[keep] - delta.bit_count() >= self.k
        source = delta if was_frequent else s.post[keep]
        near: set[int] = set()
        for r in s.records(source):
            near |= self.items_of[r]
        near.discard(keep)
        for y in near:
            if s.sup[y] >= self.k:
                both = (s.post[keep] & s.post[y]).bit_count()
                if both < self.k:
                    self.push((min(keep, y), max(keep, y)), both)

    def suppressed(self, e: int) -> None:
        if self.m >= 2:
            for r in self.s.records(self.s.post[e]):
                self.items_of[r].discard(e)


class FullQueue(_Queue):
    """Q as in the paper: every infrequent itemset of ≤ m items, rewritten on each change."""

    def __init__(self, state: _Items, k: int, m: int, rec: np.ndarray, local: np.ndarray):
        super().__init__(state, k, m, rec, local)
        per_record: dict[int, list[int]] = {}
        for r, c in zip(rec.tolist(), local.tolist(), strict=True):
            per_record.setdefault(r, []).append(c)
        counts: Counter[tuple[int, ...]] = Counter()
        for codes in per_record.values():
            codes.sort()
            for size in range(1, min(m, len(codes)) + 1):
                counts.update(itertools.combinations(codes, size))
        self.members: dict[int, set[tuple[int, ...]]] = {}
        self.queue: set[tuple[int, ...]] = set()
        for p, n in counts.items():
            if n < k:
                self._add(p)
        self.heap = [(-counts[p], len(p), p) for p in self.queue]
        heapq.heapify(self.heap)

    def _add(self, p: tuple[int, ...]) -> None:
        self.queue.add(p)
        for x in p:
            self.members.setdefault(x, set()).add(p)

    def _remove(self, p: tuple[int, ...]) -> None:
        self.queue.discard(p)
        for x in p:
            self.members.get(x, set()).discard(p)

    def _rewrite(self, old: int, new: int | None) -> None:
        for p in list(self.members.get(old, ())):
            self._remove(p)
            q = tuple(sorted({new if x == old else x for x in p} - {None}))
            if q:
                self._add(q)
        self.members.pop(old, None)

    def merged(self, keep: int, gone: int, delta: int) -> None:
        self._rewrite(gone, keep)
        for p in list(self.members.get(keep, ())):
            n = self.s.support(list(p))
            if n >= self.k:
                self._remove(p)
            else:
                self.push(p, n)

    def suppressed(self, e: int) -> None:
        changed = [tuple(x for x in p if x != e) for p in self.members.get(e, ())]
        self._rewrite(e, None)
        for q in changed:
            if q and q in self.queue:
                self.push(q, self.s.support(list(q)))
