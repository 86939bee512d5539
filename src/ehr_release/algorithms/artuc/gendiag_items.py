"""GenDiag's item state: one cluster's items (merged code sets), their records as bitsets and
their supports — what both queue strategies of :mod:`.gendiag_queues` fix.
"""

from __future__ import annotations

import functools
import heapq
import itertools

import numpy as np


@functools.lru_cache(maxsize=256)
def _triu(length: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) of ``length`` items; cached: every cluster needs the same few."""
    a, b = np.triu_indices(length, 1)
    a.flags.writeable = False
    b.flags.writeable = False
    return a, b


# --------------------------------------------------------------------------- item state
def _postings(n: int, rec: np.ndarray, local: np.ndarray, d: int) -> list[int]:
    """Each item's records as a Python-int bitset, built from packed bit rows.

    Blocks of items keep the dense bit matrix small (≈4 MB) even for a whole group.
    """
    width = (n + 7) // 8
    block = max(1, (1 << 22) // max(8 * width, 1))
    if d <= block:  # one block: no need to sort the occurrences by item
        return _bit_rows(rec, local, d, width)
    order = np.argsort(local, kind="stable")
    bounds = np.searchsorted(local[order], np.arange(d + 1))
    out: list[int] = []
    for lo in range(0, d, block):
        hi = min(d, lo + block)
        sel = order[bounds[lo]:bounds[hi]]
        out.extend(_bit_rows(rec[sel], local[sel] - lo, hi - lo, width))
    return out


def _bit_rows(rec: np.ndarray, local: np.ndarray, d: int, width: int) -> list[int]:
    """Rows 0..d−1 of the bit matrix with bits (local, rec) set, as Python ints."""
    bits = np.zeros((d, 8 * width), dtype=np.uint8)
    bits[local, rec] = 1
    raw = memoryview(np.packbits(bits, axis=1, bitorder="little").tobytes())
    return [int.from_bytes(raw[i * width:(i + 1) * width], "little") for i in range(d)]


class _Items:
    """Items of one cluster: bitset postings over its records, sizes, code sets, partners.

    ``partners[set]`` is a heap of ``(size, −support, mincode, item)`` with stale entries
    dropped lazily: an entry is valid while its item is alive with that size and support.
    """

    def __init__(self, n: int, rec: np.ndarray, local: np.ndarray, code_set: np.ndarray):
        d = len(code_set)
        self.post = _postings(n, rec, local, d)
        sup = np.bincount(local, minlength=d)
        self.sup = sup.tolist()
        self.size = [1] * d
        self.mincode = list(range(d))
        self.alive = [True] * d
        self.suppressed = [False] * d
        self.parent = list(range(d))
        self.code_set = code_set.tolist()
        self.suppressed_codes = 0
        self.partners = self._partner_heaps(code_set, sup)

    @staticmethod
    def _partner_heaps(code_set: np.ndarray,
                       sup: np.ndarray) -> dict[int, list[tuple[int, int, int, int]]]:
        """One heap per code set; a sorted list is already a heap."""
        if not len(sup):
            return {}
        ids = np.lexsort((np.arange(len(sup)), -sup, code_set))
        sets = code_set[ids]
        items = ids.tolist()
        entries = list(zip(itertools.repeat(1), (-sup[ids]).tolist(), items, items))
        starts = np.flatnonzero(np.diff(sets)) + 1
        lo = [0, *starts.tolist()]
        hi = [*starts.tolist(), len(entries)]
        return {cs: entries[a:b] for cs, a, b in zip(sets[lo].tolist(), lo, hi, strict=True)}

    def best_partner(self, u: int) -> int:
        """The smallest item of u's code set other than u (ties: support, then codes); −1 if
        there is none."""
        heap = self.partners[self.code_set[u]]
        alive, size, sup = self.alive, self.size, self.sup
        while heap:
            top = heap[0]
            v = top[3]
            if alive[v] and size[v] == top[0] and sup[v] == -top[1]:
                break
            heapq.heappop(heap)
        else:
            return -1
        if v != u:
            return v
        mine = heapq.heappop(heap)
        found = self.best_partner(u) if heap else -1
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
