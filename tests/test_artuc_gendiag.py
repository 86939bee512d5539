"""GenDiag against a literal, from-scratch reading of the pseudo-code (slow but obvious).

The reference below recomputes every support at every step and keeps Q as "every infrequent
present itemset of ≤ m items", with the same tie rules as the production code. Both
production queues (the border queue used for m ≤ 2 and the full queue) must give exactly
the same generalization, and the output must be k^m-anonymous inside the cluster.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.gendiag import gendiag

CODES = [f"{c:03d}" for c in range(1, 11)]


def reference(records: list[set[str]], code_set: dict[str, int], k: int, m: int):
    """Returns (per-record set of items as frozensets, per-record suppressed count, s)."""
    codes = sorted({c for r in records for c in r})
    items = {i: frozenset([c]) for i, c in enumerate(codes)}
    held = [{codes.index(c) for c in r} for r in records]
    s = 0

    def sup(p):
        return sum(1 for h in held if set(p) <= h)

    def mincode(i):
        return min(items[i])

    def present():
        out = set()
        for h in held:
            for size in range(1, min(m, len(h)) + 1):
                out.update(tuple(sorted(c)) for c in itertools.combinations(h, size))
        return out

    while True:
        q = [p for p in present() if sup(p) < k]
        if not q:
            break
        p = min(q, key=lambda x: (-sup(x), len(x), x))
        p = list(p)
        while p and sup(p) < k:
            best = None
            for u in p:
                for v in items:
                    if v == u or not any(v in h for h in held):
                        continue
                    if code_set[mincode(u)] != code_set[mincode(v)]:
                        continue
                    key = (len(items[u]) + len(items[v]), -sup([v]), mincode(v), mincode(u))
                    if best is None or key < best[0]:
                        best = (key, u, v)
            if best:
                _, u, v = best
                keep, gone = (u, v) if (sup([u]), -u) >= (sup([v]), -v) else (v, u)
                items[keep] = items[keep] | items.pop(gone)
                for h in held:
                    if gone in h:
                        h.discard(gone)
                        h.add(keep)
                p = sorted({keep if x in (u, v) else x for x in p})
            else:
                e = min(p, key=lambda x: (sup([x]), mincode(x)))
                s += len(items[e])
                for h in held:
                    h.discard(e)
                del items[e]
                p.remove(e)
    out = [{items[i] for i in h} for h in held]
    lost = [len(r - {c for it in o for c in it}) for r, o in zip(records, out, strict=True)]
    return out, lost, s


def production(records, code_set, k, m, full):
    table = CodeTable.build([frozenset(r) for r in records], code_set)
    g = gendiag(table, np.arange(len(records)), k=k, m=m, full_queue=full)
    out = [set() for _ in records]
    lost = [0] * len(records)
    for r, it in zip(g.rec.tolist(), g.item.tolist(), strict=True):
        if it < 0:
            lost[r] += 1
        else:
            out[r].add(frozenset(table.names[c] for c in g.items[it]))
    return out, lost, g.suppressed, g


clusters = st.integers(2, 4).flatmap(lambda k: st.tuples(
    st.just(k), st.integers(1, 2),
    st.lists(st.sets(st.sampled_from(CODES), max_size=5), min_size=k, max_size=14),
    st.lists(st.integers(0, 2), min_size=len(CODES), max_size=len(CODES))))


@settings(max_examples=50, deadline=None)
@given(clusters)
def test_border_and_full_queues_equal_the_reference(case) -> None:
    k, m, records, sets = case
    code_set = dict(zip(CODES, sets, strict=True))
    expected = reference(records, code_set, k, m)
    for full in (False, True):
        got = production(records, code_set, k, m, full)
        assert got[:3] == expected


@settings(max_examples=30, deadline=None)
@given(clusters)
def test_m3_full_queue_equals_the_reference(case) -> None:
    k, _, records, sets = case
    code_set = dict(zip(CODES, sets, strict=True))
    assert production(records, code_set, k, 3, False)[:3] == reference(records, code_set, k, 3)


@settings(max_examples=50, deadline=None)
@given(clusters)
def test_output_is_km_anonymous_truthful_and_inside_code_sets(case) -> None:
    k, m, records, sets = case
    code_set = dict(zip(CODES, sets, strict=True))
    out, lost, s, g = production(records, code_set, k, m, False)
    for size in range(1, m + 1):
        counts: dict = {}
        for its in out:
            for combo in itertools.combinations(sorted(its, key=sorted), size):
                counts[combo] = counts.get(combo, 0) + 1
        assert all(n >= k for n in counts.values())
    for r, its, n_lost in zip(records, out, lost, strict=True):
        assert all(it & r for it in its)                          # each item is truthful
        assert all(len({code_set[c] for c in it}) == 1 for it in its)
        assert n_lost == len(r - {c for it in its for c in it})
    assert g.ul_suppression == sum(lost)
    assert s >= len({c for r, its in zip(records, out, strict=True)
                     for c in r - {x for it in its for x in it}})


def test_singleton_items_cost_nothing_and_a_lone_code_is_suppressed() -> None:
    records = [{"001", "002"}, {"001", "002"}, {"001", "003"}]
    out, lost, s, g = production(records, {"001": 0, "002": 0, "003": 1}, 2, 1, False)
    assert out[2] == {frozenset({"001"})} and lost == [0, 0, 1] and s == 1
    assert g.ul_generalization == 0.0 and g.ul == 1.0
