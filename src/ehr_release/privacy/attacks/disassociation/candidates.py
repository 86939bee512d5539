"""Candidate sets: per code and per pair, the smallest positive number of records a
knowledge set can be narrowed to, under independent shuffles (``cand_P``) and under the
positional reading; and the direct enumeration any m uses (:class:`ByCluster`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ehr_release.privacy.attacks.disassociation.arrays import (
    counted,
    distinct,
    lookup,
    min_by_key,
    pairs_in_rows,
    ranges,
    row_batches,
    tiled,
)
from ehr_release.privacy.attacks.disassociation.positions import position_rows
from ehr_release.privacy.attacks.disassociation.release import Release


@dataclass(frozen=True)
class Domain:
    """Per cluster, every code it can hold: ``(cluster, code, unit or -1 for the item
    chunk, value)`` sorted by cluster, value = the code's support in its unit (|P| for an
    item-chunk code). A joint cluster's shared codes are in the domain of every member."""

    cluster: np.ndarray
    code: np.ndarray
    unit: np.ndarray
    value: np.ndarray
    pair_keys: np.ndarray       # unit·C² + a·C + b for pairs inside one subrecord
    pair_counts: np.ndarray


def build_domain(r: Release) -> Domain:
    c = r.n_codes
    owner_sub = r.sub_unit[np.repeat(np.arange(len(r.sub_unit)), np.diff(r.sub_indptr))]
    uk, us = counted(owner_sub * c + r.sub_codes)
    unit, code = uk // c, uk % c
    a, b = pairs_in_rows(r.sub_indptr)
    pk, pn = counted(owner_sub[a] * c * c + r.sub_codes[a] * c + r.sub_codes[b])
    rec = ~r.unit_shared[unit]
    parts = [(r.unit_owner[unit[rec]], code[rec], unit[rec], us[rec])]
    # a joint cluster's shared codes, once for each member (joint by joint, member by member)
    sh = np.flatnonzero(~rec)
    joint = r.unit_owner[unit[sh]]
    order = np.argsort(joint, kind="stable")
    by_joint = np.r_[0, np.cumsum(np.bincount(joint, minlength=r.n_joints))].astype(np.int64)
    jrun, rows = tiled(by_joint, sh[order], np.diff(r.member_indptr))
    per = np.maximum(np.diff(by_joint), 1)[jrun]
    _, offset = ranges(np.diff(by_joint) * np.diff(r.member_indptr))
    member = r.members[r.member_indptr[jrun] + offset // per]
    parts.append((member, code[rows], unit[rows], us[rows]))
    item_cluster = np.repeat(np.arange(len(r.size)), np.diff(r.item_indptr))
    parts.append((item_cluster, r.item_codes, np.full(len(item_cluster), -1),
                  r.size[item_cluster]))
    cl, co, un, va = (np.concatenate([np.asarray(x[i], dtype=np.int64) for x in parts])
                      for i in range(4))
    order = np.argsort(cl * max(c, 1) + co, kind="stable")   # by cluster, then code
    return Domain(cl[order], co[order], un[order], va[order], pk, pn)


def unlinked_candidates(r: Release, d: Domain, m: int
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Smallest positive cand_P(S) per code and per pair of codes (sorted keys a·C + b).

    A pair's cand_P is the smaller of its codes' (each capped at |P|), and at most their
    support together when one chunk holds both."""
    c = r.n_codes
    single = np.minimum(d.value, r.size[d.cluster])
    k1, v1 = min_by_key(d.code[single > 0], single[single > 0], c)
    keys: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    if m >= 2:
        indptr = np.r_[0, np.cumsum(np.bincount(d.cluster, minlength=len(r.size)))]
        for lo, hi in row_batches(indptr):
            x, y = pairs_in_rows(indptr[lo:hi + 1] - indptr[lo])
            x, y = x + indptr[lo], y + indptr[lo]
            v = np.minimum(single[x], single[y])
            ux, uy = d.unit[x], d.unit[y]
            same = np.flatnonzero((ux == uy) & (ux >= 0))
            v[same] = np.minimum(v[same], lookup(
                d.pair_keys, d.pair_counts,
                ux[same] * c * c + d.code[x[same]] * c + d.code[y[same]]))
            ok = v > 0
            if not ok.all():
                x, y, v = x[ok], y[ok], v[ok]
            kk, vv = min_by_key(d.code[x] * c + d.code[y], v, c * c)
            keys.append(kk)
            vals.append(vv)
    k2, v2 = min_by_key(np.concatenate(keys), np.concatenate(vals), c * c) if keys else \
        (np.zeros(0, np.int64), np.zeros(0, np.int64))
    return k1, v1, k2, v2


def positional_candidates(r: Release, m: int
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Under the positional reading: per code and pair, the smallest positive number of
    positions of one cluster holding it (item-chunk codes may sit at any position)."""
    indptr, codes, _ = position_rows(r, r.sub_pos)
    n_pos = len(indptr) - 1
    cluster_of_pos = np.repeat(np.arange(len(r.size)), r.size)
    extra = np.diff(r.item_indptr)[cluster_of_pos]
    row = np.concatenate([np.repeat(np.arange(n_pos), np.diff(indptr)),
                          np.repeat(np.arange(n_pos), extra)])
    _, item_codes = tiled(r.item_indptr, r.item_codes, r.size)
    key = distinct(row * r.n_codes + np.concatenate([codes, item_codes]))
    indptr = np.zeros(n_pos + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // r.n_codes, minlength=n_pos), out=indptr[1:])
    codes, c = key % r.n_codes, r.n_codes
    prow = key // r.n_codes
    ck, cn = counted(cluster_of_pos[prow] * c + codes)
    k1, v1 = min_by_key(ck % c, cn, c)
    k2 = v2 = np.zeros(0, dtype=np.int64)
    if m >= 2:
        a, b = pairs_in_rows(indptr)
        ck, cn = counted((cluster_of_pos[prow[a]] * c + codes[a]) * c + codes[b])
        k2, v2 = min_by_key(ck % (c * c), cn, c * c)
    return k1, v1, k2, v2


# --------------------------------------------------------------------------- general m
class ByCluster:
    """cand_P(S) and the positional count for any S, by direct enumeration (any m)."""

    def __init__(self, r: Release, d: Domain, positional: bool) -> None:
        self.r = r
        self.place: list[dict[int, tuple[int, int]]] = [{} for _ in range(len(r.size))]
        self.holders: dict[int, set[int]] = {}
        for p, t, u, v in zip(d.cluster.tolist(), d.code.tolist(), d.unit.tolist(),
                              d.value.tolist(), strict=True):
            self.place[p][t] = (u, v)
            self.holders.setdefault(t, set()).add(p)
        self.subs: dict[int, list[frozenset[int]]] = {}
        flat, bounds = r.sub_codes.tolist(), r.sub_indptr.tolist()
        for s, u in enumerate(r.sub_unit.tolist()):
            self.subs.setdefault(u, []).append(frozenset(flat[bounds[s]:bounds[s + 1]]))
        self.rows: list[list[frozenset[int]]] = []
        if positional:
            indptr, codes, _ = position_rows(r, r.sub_pos)
            ip, cs = indptr.tolist(), codes.tolist()
            for p in range(len(r.size)):
                extra = frozenset(r.items_of(p).tolist())
                lo = int(r.base[p])
                self.rows.append([frozenset(cs[ip[i]:ip[i + 1]]) | extra
                                  for i in range(lo, lo + int(r.size[p]))])
        self.cache: dict[tuple[int, frozenset[int]], int] = {}

    def _support(self, unit: int, part: frozenset[int]) -> int:
        key = (unit, part)
        if key not in self.cache:
            self.cache[key] = sum(1 for s in self.subs.get(unit, ()) if part <= s)
        return self.cache[key]

    def unlinked(self, p: int, s: tuple[int, ...]) -> int:
        place = self.place[p]
        parts: dict[int, set[int]] = {}
        best = int(self.r.size[p])
        for t in s:
            u, v = place[t]
            if u >= 0:
                parts.setdefault(u, set()).add(t)
        for u, part in parts.items():
            best = min(best, self._support(u, frozenset(part)))
        return best

    def positional(self, p: int, s: tuple[int, ...]) -> int:
        want = frozenset(s)
        return sum(1 for row in self.rows[p] if want <= row)

    def candidates(self, s: tuple[int, ...], positional: bool) -> int:
        clusters = set.intersection(*(self.holders.get(t, set()) for t in s))
        counts = [self.positional(p, s) if positional else self.unlinked(p, s)
                  for p in clusters]
        return min((x for x in counts if x > 0), default=0)

