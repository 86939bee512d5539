"""The figures behind requirements 3–5: weakest chunk itemset, weakest cap, inconsistencies."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ehr_release.model.dataset import Dataset
from ehr_release.model.mapping import MapFn
from ehr_release.privacy.disassociation.arrays import lookup
from ehr_release.privacy.disassociation.caps import caps_general, caps_small
from ehr_release.privacy.disassociation.counts import (
    chunk_counts_general,
    chunk_counts_small,
    original_counts_general,
    original_counts_small,
)
from ehr_release.privacy.disassociation.evidence import MAX_EVIDENCE
from ehr_release.privacy.disassociation.parse import ParsedRelease
from ehr_release.privacy.disassociation.tables import Tables, build_tables
from ehr_release.privacy.itemset_counts import Itemset


@dataclass(frozen=True)
class Findings:
    """The figures behind the requirements (also handy for tests and the benchmark)."""

    weakest_chunk_itemset: tuple[str, ...] | None
    weakest_chunk_support: int | None
    weakest_chunk: str | None
    weakest_itemset: tuple[str, ...] | None
    weakest_cap: int | None
    itemsets_checked: int
    untruthful: list[str]


def _names(t: Tables, s: Iterable[int]) -> tuple[str, ...]:
    return tuple(t.codes[i] for i in s)


def analyse(rel: ParsedRelease, dataset: Dataset, m: int, *, general: bool | None = None
            ) -> Findings:
    """Chunk anonymity, Guarantee 1 and truthfulness figures for a well-formed release."""
    return analyse_tables(build_tables(rel, dataset), m, general=general)


def analyse_tables(t: Tables, m: int, *, general: bool | None = None,
                   map_fn: MapFn | None = None) -> Findings:
    """As :func:`analyse` on built tables; ``general=None`` picks the fast path for m ≤ 2,
    ``True`` forces the direct enumeration, whose counting ``map_fn`` may spread out."""
    if general is None:
        general = m > 2
    return _analyse_general(t, m, map_fn) if general else _analyse_small(t, m)


def _analyse_small(t: Tables, m: int) -> Findings:
    c = len(t.codes)
    k1, n1, k2, n2 = chunk_counts_small(t)
    if m < 2:
        k2, n2 = k2[:0], n2[:0]
    weak: tuple[tuple[str, ...], int, str] | None = None
    if len(n1):
        i = int(np.argmin(n1))
        weak = (_names(t, [k1[i] % c]), int(n1[i]), t.chunk_label[k1[i] // c])
    if len(n2) and (weak is None or n2.min() < weak[1]):
        i = int(np.argmin(n2))
        weak = (_names(t, [(k2[i] // c) % c, k2[i] % c]), int(n2[i]),
                t.chunk_label[k2[i] // (c * c)])
    single, q2, s2 = original_counts_small(t)
    if m < 2:
        q2, s2 = q2[:0], s2[:0]
    cap1, cap2 = caps_small(t, k2, n2, q2)
    present = np.flatnonzero(single)
    candidates = [(float(cap1[x]), _names(t, [x])) for x in present[np.argsort(cap1[present])[:1]]]
    if len(q2):
        i = int(np.argmin(cap2))
        candidates.append((float(cap2[i]), _names(t, [q2[i] // c, q2[i] % c])))
    worst = min(candidates, default=None)
    # truthfulness: published counts ≤ original ≤ cap
    untruthful: list[str] = []
    lower1 = np.bincount(k1 % c, weights=n1, minlength=c) \
        + np.bincount(t.dom_code[t.dom_chunk < 0], minlength=c)
    for x in np.flatnonzero(lower1 > single)[:MAX_EVIDENCE]:
        untruthful.append(f"{t.codes[x]}: release shows ≥ {int(lower1[x])} records, "
                          f"original has {int(single[x])}")
    for x in np.flatnonzero(cap1 < single)[:MAX_EVIDENCE]:
        untruthful.append(f"{t.codes[x]}: original has {int(single[x])} records, "
                          f"no reconstruction can hold more than {int(cap1[x])}")
    if len(k2):
        pk, inv = np.unique(k2 % (c * c), return_inverse=True)
        lower2 = np.bincount(inv, weights=n2)
        orig2 = lookup(q2, s2, pk)
        for i in np.flatnonzero(lower2 > orig2)[:MAX_EVIDENCE]:
            untruthful.append(f"{_names(t, [pk[i] // c, pk[i] % c])}: release shows "
                              f"≥ {int(lower2[i])} records, original has {int(orig2[i])}")
    for i in np.flatnonzero(cap2 < s2)[:MAX_EVIDENCE]:
        untruthful.append(f"{_names(t, [q2[i] // c, q2[i] % c])}: original has {int(s2[i])} "
                          f"records, no reconstruction can hold more than {int(cap2[i])}")
    return Findings(weak[0] if weak else None, weak[1] if weak else None,
                    weak[2] if weak else None, worst[1] if worst else None,
                    int(worst[0]) if worst else None, len(present) + len(q2), untruthful)


def _analyse_general(t: Tables, m: int, map_fn: MapFn | None = None) -> Findings:
    counts = chunk_counts_general(t, m, map_fn)
    weak: tuple[tuple[str, ...], int, str] | None = None
    for g, counter in enumerate(counts):
        for s, n in counter.items():
            if weak is None or (n, _names(t, s)) < (weak[1], weak[0]):
                weak = (_names(t, s), n, t.chunk_label[g])
    original = original_counts_general(t, m, map_fn)
    caps = caps_general(t, counts, original)
    worst = min(((v, _names(t, s)) for s, v in caps.items()), default=None)
    untruthful: list[str] = []
    lower: Counter[Itemset] = Counter()
    for counter in counts:
        lower.update(counter)
    for code in t.dom_code[t.dom_chunk < 0].tolist():
        lower[(code,)] += 1
    for s, n in sorted(lower.items()):
        if n > original.get(s, 0) and len(untruthful) < MAX_EVIDENCE:
            untruthful.append(f"{_names(t, s)}: release shows ≥ {n} records, "
                              f"original has {original.get(s, 0)}")
    for s, n in sorted(original.items()):
        if caps[s] < n and len(untruthful) < 2 * MAX_EVIDENCE:
            untruthful.append(f"{_names(t, s)}: original has {n} records, no reconstruction "
                              f"can hold more than {caps[s]}")
    return Findings(weak[0] if weak else None, weak[1] if weak else None,
                    weak[2] if weak else None, worst[1] if worst else None,
                    int(worst[0]) if worst else None, len(original), untruthful)

