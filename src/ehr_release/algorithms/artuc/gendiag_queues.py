"""GenDiag's pure-Python loop: the items of one cluster and the queue Q of itemsets to fix.

Two strategies select the same itemset at every step (see :mod:`.gendiag`): ``FullQueue``
materializes every infrequent ≤m-itemset as the paper does, ``BorderQueue`` tracks only
infrequent items and infrequent pairs of frequent items. :mod:`.gendiag` drives them (or
the compiled loop of :mod:`.gendiag_kernel`); this module holds their state and fixes.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter

import numpy as np

from ehr_release.algorithms.artuc.gendiag_items import (
    _Items,
    _triu,
)


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
                if v >= 0:
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


_ID_BITS = 24  # item ids in BorderQueue's int-encoded Q entries


_INT64_KEYS_BELOW_K = 1 << 13  # (k − support) << 49 fits an int64 key for smaller k


#: Q is purged of dead entries when, checked every _PURGE_EVERY pops, at most this share of
#: the items alive at the last purge still lives (0.4–0.9 measured: 0.6 was fastest).
_PURGE_WHEN_ALIVE = 0.6


_PURGE_EVERY = 1024


def initial_q(k: int, m: int, sup: np.ndarray, rec: np.ndarray,
              local: np.ndarray) -> list[int]:
    """BorderQueue's Q at the start, as int keys (unordered): the infrequent items and, for
    m ≥ 2, the infrequent co-occurring pairs of frequent items."""
    sup = np.asarray(sup, dtype=np.int64)
    ids = np.flatnonzero(sup < k)
    entries = _keys(k, sup[ids], ids, None)
    if m >= 2:
        entries.extend(_frequent_pairs(k, rec, local, sup >= k))
    return entries


def _keys(k: int, support: np.ndarray, a: np.ndarray, b: np.ndarray | None) -> list[int]:
    """Q entries as ints ordered like ``(−support, len(p), p)`` (see :meth:`BorderQueue.push`)."""
    dtype = np.int64 if k < _INT64_KEYS_BELOW_K else object
    key = ((k - support.astype(dtype)) << (2 * _ID_BITS + 1)) | (a.astype(dtype) << _ID_BITS)
    if b is not None:
        key = key | (1 << (2 * _ID_BITS)) | b.astype(dtype)
    return key.tolist()  # Python ints (int64 and object arrays alike)


def _frequent_pairs(k: int, rec: np.ndarray, local: np.ndarray,
                    frequent: np.ndarray) -> list[int]:
    """BorderQueue's initial pair keys: co-occurring pairs of frequent items below k."""
    keep = frequent[local]
    r, c = rec[keep], local[keep]
    step = np.diff(r)
    # gather() lists records in order and each record's codes sorted: already lexsorted
    if (step < 0).any() or ((step == 0) & (np.diff(c) <= 0)).any():
        order = np.lexsort((c, r))
        r, c = r[order], c[order]
        step = np.diff(r)
    starts = np.concatenate(([0], np.flatnonzero(step) + 1)) if len(r) else step
    lens = np.diff(np.append(starts, len(r)))
    firsts, seconds = [], []
    for length in np.flatnonzero(np.bincount(lens)) if len(lens) else ():
        if length < 2:
            continue
        base = starts[lens == length]
        a, b = _triu(int(length))
        firsts.append((base[:, None] + a).ravel())
        seconds.append((base[:, None] + b).ravel())
    if not firsts:
        return []
    d = len(frequent)
    keys = np.sort(c[np.concatenate(firsts)] * d + c[np.concatenate(seconds)])
    bounds = np.flatnonzero(np.diff(keys)) + 1
    uniq = keys[np.concatenate(([0], bounds))]
    counts = np.diff(np.concatenate(([0], bounds, [len(keys)])))
    rare = counts < k
    return _keys(k, counts[rare], uniq[rare] // d, uniq[rare] % d)


class BorderQueue(_Queue):
    """Q restricted to infrequent items and infrequent pairs of frequent items (m ≤ 2).

    Two shortcuts keep its output equal to running :meth:`_Queue.fix` merge by merge:

    * an infrequent singleton is grown in one go (:meth:`_grow`), and
    * the items near a merged item are found among the alive frequent items (the only ones
      a pair may be pushed for) instead of through per-record item sets.
    """

    def __init__(self, state: _Items, k: int, m: int, rec: np.ndarray, local: np.ndarray):
        super().__init__(state, k, m, rec, local)
        if len(state.sup) >= 1 << _ID_BITS:
            raise ValueError(f"GenDiag handles fewer than {1 << _ID_BITS} codes per cluster")
        sup = np.array(state.sup, dtype=np.int64)
        self.frequent: set[int] = set(np.flatnonzero(sup >= k).tolist())
        self.dirty: dict[int, int | None] = {}
        entries = initial_q(k, m, sup, rec, local)
        heapq.heapify(entries)
        self.int_heap = entries

    def push(self, p: tuple[int, ...], support: int) -> None:
        """Q holds ints, not tuples (much cheaper heap operations): (k − support), then a
        pair bit, then the item ids, each in its own bit field, so int order is tuple order.
        """
        key = (self.k - support) << (2 * _ID_BITS + 1) | p[0] << _ID_BITS
        if len(p) == 2:
            key |= 1 << (2 * _ID_BITS) | p[1]
        heapq.heappush(self.int_heap, key)

    def run(self) -> None:
        """The generic loop, specialized: an entry is live iff its items are alive and its
        support is current (every pushed support is < k)."""
        s, heap, k = self.s, self.int_heap, self.k
        alive, sup, post = s.alive, s.sup, s.post
        pop, grow, fix_pair, flush = heapq.heappop, self._grow, self._fix_pair, self._flush
        mask, shift, pair = (1 << _ID_BITS) - 1, 2 * _ID_BITS + 1, 1 << (2 * _ID_BITS)
        purging = self.k < _INT64_KEYS_BELOW_K
        alive_at_purge, pops, check_at = sum(alive), 0, _PURGE_EVERY
        while heap:
            pops += 1
            if pops == check_at and purging:
                check_at += _PURGE_EVERY
                now = sum(alive)
                if now <= _PURGE_WHEN_ALIVE * alive_at_purge:
                    self._purge_dead()
                    alive_at_purge = now
                    if not heap:
                        break
            key = pop(heap)
            a = (key >> _ID_BITS) & mask
            if not key & pair:
                if alive[a] and sup[a] == k - (key >> shift):
                    grow(a)
                    flush()
                continue
            b = key & mask
            if alive[a] and alive[b] and (post[a] & post[b]).bit_count() == k - (key >> shift):
                fix_pair(a, b)
                flush()

    def _purge_dead(self) -> None:
        """Drop the entries of dead items from Q at once.

        Merges kill items, and every pair entry of a dead item is skipped when popped: most
        of Q ends up dead (2,000 records: 67,000 of 88,000 pops). An item never comes back
        to life, so dropping those entries changes nothing but the cost of the heap.
        """
        keys = np.fromiter(self.int_heap, dtype=np.int64, count=len(self.int_heap))
        alive = np.array(self.s.alive, dtype=bool)
        mask = (1 << _ID_BITS) - 1
        pair = (keys >> (2 * _ID_BITS)) & 1 == 1
        live = alive[(keys >> _ID_BITS) & mask] & (~pair | alive[keys & mask])
        self.int_heap[:] = keys[live].tolist()
        heapq.heapify(self.int_heap)

    def _fix_pair(self, a: int, b: int) -> None:
        """``fix([a, b])`` for two frequent items: the generic loop with p kept as a pair.

        The partner keys of a and b never tie (their mincodes differ), so the side order
        does not matter; merging a with b leaves one frequent item, which ends the fix.

        Fast path (GenDiag's hottest loop): when the code set's best valid item t is neither
        a nor b, it is both sides' best partner and the two keys differ only in size and
        mincode, so the smaller side absorbs t inline. A grown side's partner-heap entry is
        not pushed at once (it would go stale at the side's next merge): the side is
        compared with the heap's top instead, and its entry is pushed when the fast path
        ends. The heap's top valid entry — the minimum over alive items — is the same.
        """
        s, k, post = self.s, self.k, self.s.post
        if s.code_set[a] != s.code_set[b]:
            self._fix_cross_pair(a, b)
            return
        heap = s.partners[s.code_set[a]]
        alive, size, sup, mincode, parent = s.alive, s.size, s.sup, s.mincode, s.parent
        frequent, dirty = self.frequent, self.dirty
        held: list[int] = []  # sides whose current entry is not in the heap yet
        while (post[a] & post[b]).bit_count() < k:
            while heap:
                top = heap[0]
                t = top[3]
                if alive[t] and size[t] == top[0] and sup[t] == -top[1]:
                    break
                heapq.heappop(heap)  # stale: best_partner would drop it too
            else:
                t = -1
            if t >= 0 and t != a and t != b and not (held and self._held_first(held, top)):
                u, other = (a, b) if (size[a], mincode[a]) < (size[b], mincode[b]) else (b, a)
                keep, gone = (u, t) if (sup[u], -u) >= (sup[t], -t) else (t, u)
                heapq.heappop(heap)  # t's entry, stale from now on (t dies or grows)
                mine = post[keep]
                delta = post[gone] & ~mine
                mine |= post[gone]
                post[keep] = mine
                sup[keep] = mine.bit_count()
                size[keep] += size[gone]
                if mincode[gone] < mincode[keep]:
                    mincode[keep] = mincode[gone]
                alive[gone] = False
                parent[gone] = keep
                frequent.discard(gone)
                dirty.pop(gone, None)
                # keep is frequent (u is): merged()'s bookkeeping for a frequent survivor
                if keep not in frequent:
                    frequent.add(keep)
                    dirty[keep] = None
                elif keep not in dirty:
                    dirty[keep] = delta
                else:
                    changed = dirty[keep]
                    if changed is not None:
                        dirty[keep] = changed | delta
                if u in held:
                    held.remove(u)
                held.append(keep)
                a, b = keep, other
                continue
            self._release(heap, held)
            va, vb = s.best_partner(a), s.best_partner(b)
            if va < 0 and vb < 0:
                e = min((a, b), key=lambda x: (s.sup[x], s.mincode[x]))
                self.suppressed(e)
                s.suppress(e)
                return
            if vb < 0 or (va >= 0 and self._key(a, va) < self._key(b, vb)):
                u, v, other = a, va, b
            else:
                u, v, other = b, vb, a
            keep, gone, delta = s.merge(u, v)
            self.merged(keep, gone, delta)
            if v == other:
                return
            a, b = keep, other
        self._release(heap, held)

    def _held_first(self, held: list[int], top: tuple[int, int, int, int]) -> bool:
        """Whether a held side's entry would be above the heap's ``top``."""
        s = self.s
        for x in held:
            if s.size[x] <= top[0] and (s.size[x], -s.sup[x], s.mincode[x], x) < top:
                return True
        return False

    def _release(self, heap: list[tuple[int, int, int, int]], held: list[int]) -> None:
        """Push the held entries of :meth:`_fix_pair`'s grown sides."""
        s = self.s
        for x in held:
            heapq.heappush(heap, (s.size[x], -s.sup[x], s.mincode[x], x))
        held.clear()

    def _fix_cross_pair(self, a: int, b: int) -> None:
        """``_fix_pair`` when a and b lie in different code sets, merge state kept local.

        Each side then only draws from its own partner heap, in heap order, so each side is
        a :class:`_Lineage` holding its next partner; the side with the smaller key absorbs
        it. The items are written back once, when the pair reaches k (or is suppressed).
        """
        s, k = self.s, self.k
        sides = (_Lineage(s, a, self.frequent), _Lineage(s, b, self.frequent))
        while (sides[0].post & sides[1].post).bit_count() < k:
            keys = [side.partner_key() for side in sides]
            if keys[0] is None and keys[1] is None:
                for side in sides:
                    side.write_back(self.dirty)
                e = min((sides[0].id, sides[1].id), key=lambda x: (s.sup[x], s.mincode[x]))
                self.suppressed(e)
                s.suppress(e)
                return
            first = keys[1] is None or (keys[0] is not None and keys[0] < keys[1])
            sides[0 if first else 1].absorb()
        for side in sides:
            side.write_back(self.dirty)

    def _key(self, u: int, v: int) -> tuple[int, int, int, int]:
        s = self.s
        return s.size[u] + s.size[v], -s.sup[v], s.mincode[v], s.mincode[u]

    def _grow(self, u: int) -> None:
        """``fix([u])`` for an infrequent item u, without the per-merge bookkeeping.

        With p = [u] the generic loop merges u's lineage with the best remaining item of its
        code set, i.e. the next valid entry of the code set's partner heap, until the support
        reaches k (or suppresses the lineage when the heap runs out). Merges before the last
        leave an infrequent item: the generic loop would push it into Q (dead on arrival: it
        is merged again at once and never becomes infrequent later) and push no pairs. So
        only the last merge needs :meth:`merged`; the others just union postings.
        """
        s, k = self.s, self.k
        heap = s.partners[s.code_set[u]]
        cur, post, sup = u, s.post[u], s.sup[u]
        size, mincode = s.size[u], s.mincode[u]
        gone, delta = -1, 0
        while sup < k:
            v = self._pop_partner(heap, cur)
            if v < 0:
                break
            pv = s.post[v]
            keep, gone = (cur, v) if (sup, -cur) >= (s.sup[v], -v) else (v, cur)
            delta = (pv if gone == v else post) & ~(post if gone == v else pv)
            s.alive[gone] = False
            s.parent[gone] = keep
            self.frequent.discard(gone)
            cur, post = keep, post | pv
            sup = post.bit_count()
            size += s.size[v]
            mincode = min(mincode, s.mincode[v])
        s.post[cur], s.sup[cur], s.size[cur], s.mincode[cur] = post, sup, size, mincode
        if gone >= 0:
            heapq.heappush(heap, (size, -sup, mincode, cur))
        if sup >= k:
            self.merged(cur, gone, delta)
        else:
            self.suppressed(cur)
            s.suppress(cur)

    def _pop_partner(self, heap: list[tuple[int, int, int, int]], cur: int) -> int:
        """Pop the best valid partner entry other than ``cur`` (−1: none left).

        Popping is safe: the partner is absorbed right away, and ``cur``'s own entry is stale
        after the first merge (its size grows) or ``cur`` is suppressed.
        """
        s = self.s
        while heap:
            entry = heapq.heappop(heap)
            v = entry[3]
            if v != cur and s.alive[v] and s.size[v] == entry[0] and s.sup[v] == -entry[1]:
                return v
        return -1

    def merged(self, keep: int, gone: int, delta: int) -> None:
        """Note which pairs of ``keep`` changed; :meth:`_flush` pushes them after the fix.

        Q's live entries are a function of the state (every alive infrequent item, every
        infrequent pair of alive frequent items, at its current support), and the fix loop
        never reads Q: pushing once per fix, for the final items, leaves the same live
        entries as pushing after every merge (entries pushed mid-fix go stale).
        """
        s = self.s
        self.frequent.discard(gone)
        self.dirty.pop(gone, None)
        if s.sup[keep] < self.k:
            self.push((keep,), s.sup[keep])
            return
        if keep not in self.frequent:  # new frequent item: all its pairs are new
            self.frequent.add(keep)
            self.dirty[keep] = None
        elif keep not in self.dirty:
            self.dirty[keep] = delta
        elif self.dirty[keep] is not None:
            self.dirty[keep] |= delta

    def _flush(self) -> None:
        """Push the infrequent pairs of the items changed by the last fix (see merged).

        Keys are built inline (see :meth:`push`): this loop is GenDiag's hottest.
        """
        if self.m < 2:
            self.dirty.clear()
            return
        k, post, heap, frequent = self.k, self.s.post, self.int_heap, self.frequent
        shift, pair, push = 2 * _ID_BITS + 1, 1 << (2 * _ID_BITS), heapq.heappush
        for x, changed in self.dirty.items():
            mine = post[x]
            source = mine if changed is None else changed
            # x itself is frequent (support ≥ k), so "both < k" leaves it out
            for y, both in [(y, both) for y in frequent if post[y] & source
                            and (both := (mine & post[y]).bit_count()) < k]:
                push(heap, (k - both) << shift | pair
                     | (x << _ID_BITS | y if x < y else y << _ID_BITS | x))
        self.dirty.clear()

    def suppressed(self, e: int) -> None:
        self.frequent.discard(e)
        self.dirty.pop(e, None)


class _Lineage:
    """One item of a pair being fixed, growing by its code set's best partners in order.

    Mirrors :meth:`_Items.merge` step by step but keeps the grown item's state local;
    absorbed items are marked dead at once so later heap entries see them as stale.
    """

    __slots__ = ("s", "frequent", "id", "post", "sup", "size", "mincode", "heap", "next",
                 "changed", "merges", "own")

    def __init__(self, s: _Items, u: int, frequent: set[int]):
        self.s, self.frequent, self.id = s, frequent, u
        self.post, self.sup, self.size, self.mincode = s.post[u], s.sup[u], s.size[u], s.mincode[u]
        self.heap = s.partners[s.code_set[u]]
        self.next = -2  # −2: not looked up yet, −1: none left
        self.changed = 0
        self.merges = 0
        self.own: tuple[int, int, int, int] | None = None  # u's own entry, if popped

    def partner_key(self) -> tuple[int, int, int, int] | None:
        """GenDiag's key for merging with the next partner (None: no partner left)."""
        s = self.s
        if self.next == -2:
            self.next = self._pop_partner()
        v = self.next
        if v < 0:
            return None
        return self.size + s.size[v], -s.sup[v], s.mincode[v], self.mincode

    def _pop_partner(self) -> int:
        s, heap, me = self.s, self.heap, self.id
        alive, size, sup = s.alive, s.size, s.sup
        while heap:
            entry = heapq.heappop(heap)
            v = entry[3]
            if alive[v] and size[v] == entry[0] and sup[v] == -entry[1]:
                if v != me:
                    return v
                self.own = entry
        return -1

    def absorb(self) -> None:
        """Merge the next partner in (survivor: higher support, then smaller id)."""
        s, v = self.s, self.next
        pv = s.post[v]
        if (self.sup, -self.id) >= (s.sup[v], -v):
            keep, gone, delta = self.id, v, pv & ~self.post
            self.changed |= delta
        else:
            keep, gone, delta = v, self.id, self.post & ~pv
            self.changed = delta
        s.alive[gone] = False
        s.parent[gone] = keep
        self.frequent.discard(gone)
        self.id, self.post = keep, self.post | pv
        self.sup = self.post.bit_count()
        self.size += s.size[v]
        self.mincode = min(self.mincode, s.mincode[v])
        self.next = -2
        self.merges += 1

    def write_back(self, dirty: dict[int, int | None]) -> None:
        """Store the grown item, re-enter it in its partner heap, mark its changed records.

        Entries popped but not used go back: the looked-up partner, and u's own entry when
        u did not grow.
        """
        s, u = self.s, self.id
        if self.next >= 0:
            v = self.next
            heapq.heappush(self.heap, (s.size[v], -s.sup[v], s.mincode[v], v))
        if not self.merges:
            if self.own is not None:
                heapq.heappush(self.heap, self.own)
            return
        s.post[u], s.sup[u], s.size[u], s.mincode[u] = self.post, self.sup, self.size, self.mincode
        heapq.heappush(self.heap, (self.size, -self.sup, self.mincode, u))
        dirty[u] = self.changed


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
