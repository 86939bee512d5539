"""The compiled GenDiag loop returns exactly what the pure-Python loop returns.

:func:`gendiag` runs :mod:`ehr_release.algorithms.artuc.gendiag_kernel` by default and the
Python ``BorderQueue`` with ``compiled=False``. Every result field (item ids included, so every
tie-break; UL floats compared with ``==``) must be identical: on small random clusters
(hypothesis), on weighted code tables, and on EHRD-shaped clusters large enough for Q to be
purged of dead entries. The Python loop itself is held to the frozen copy of the step-by-step
GenDiag by ``test_artuc_gendiag_equivalence.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.artuc import gendiag as gendiag_module
from ehr_release.algorithms.artuc import gendiag_kernel
from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.gendiag import CodeGeneralization, gendiag
from tests import artuc_gendiag_reference as frozen
from tests.test_artuc_gendiag_equivalence import ehrd_shaped, table_of


def assert_identical(got: CodeGeneralization, want: CodeGeneralization) -> None:
    for name in ("rows", "rec", "code", "item"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert got.items == want.items
    assert list(got.items) == list(want.items)  # same key order too
    assert got.ul_generalization == want.ul_generalization
    assert got.ul_suppression == want.ul_suppression
    assert got.suppressed == want.suppressed
    assert type(got.suppressed) is type(want.suppressed)


def assert_compiled_matches(table: CodeTable, rows: np.ndarray, k: int, m: int) -> None:
    assert_identical(gendiag(table, rows, k, m), gendiag(table, rows, k, m, compiled=False))


@st.composite
def small_clusters(draw: st.DrawFn) -> tuple[CodeTable, np.ndarray, int, int]:
    vocab = draw(st.integers(1, 14))
    code_set = draw(st.lists(st.integers(0, 3), min_size=vocab, max_size=vocab))
    k = draw(st.integers(1, 7))
    records = draw(
        st.lists(
            st.lists(st.integers(0, vocab - 1), max_size=7, unique=True), min_size=1, max_size=40
        )
    )
    rows = draw(st.permutations(range(len(records))))
    rows = rows[: draw(st.integers(1, len(rows)))]
    return table_of(records, code_set), np.array(rows, dtype=np.int64), k, draw(st.integers(1, 2))


@settings(max_examples=500, deadline=None)
@given(small_clusters())
def test_small_random_clusters(case) -> None:
    table, rows, k, m = case
    assert_compiled_matches(table, rows, k, m)
    if k >= 2:  # and both equal the frozen step-by-step copy
        want = frozen.gendiag(table, rows, k=k, m=m)
        assert gendiag(table, rows, k, m).items == want.items


def test_records_without_codes_and_empty_clusters() -> None:
    table = table_of([[], [0, 1], [], [1]], [0, 0])
    for rows in ([0], [0, 2], [1, 3], [0, 1, 2, 3]):
        for k in (1, 2, 3, 5):
            assert_compiled_matches(table, np.array(rows, dtype=np.int64), k, 2)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(20, 300),
    st.sampled_from([2, 3, 5, 10, 25]),
    st.sampled_from([1, 2]),
    st.booleans(),
)
def test_random_ehrd_shaped_clusters(seed, n, k, m, weighted) -> None:
    rng = np.random.default_rng(seed)
    table = ehrd_shaped(
        rng, n, int(rng.integers(50, 2500)), int(rng.integers(1, 18)), float(rng.uniform(2, 18))
    )
    if weighted:  # Def. 5's w(ũ): UL is computed after the loop, from the same items
        table = CodeTable(
            table.names,
            table.indptr,
            table.indices,
            table.code_set,
            rng.choice([0.5, 1.0, 2.0, 3.0], len(table.names)),
        )
    rows = rng.permutation(n)[: int(rng.integers(1, n + 1))]
    assert_compiled_matches(table, rows, k, m)


@pytest.mark.parametrize(
    ("seed", "n", "vocab", "chapters", "mean", "k"),
    [
        (11, 1500, 6000, 17, 16.0, 10),  # thousands of pops: Q is purged of dead entries
        (12, 2500, 3000, 17, 16.0, 5),
        (13, 1200, 400, 1, 10.0, 25),  # one code set: every partner in one heap
        (14, 700, 5000, 17, 16.0, 2),
    ],
)
def test_large_clusters(seed, n, vocab, chapters, mean, k) -> None:
    rng = np.random.default_rng(seed)
    table = ehrd_shaped(rng, n, vocab, chapters, mean)
    assert_compiled_matches(table, rng.permutation(n), k, 2)


def test_m_above_2_and_full_queue_take_the_python_loop() -> None:
    rng = np.random.default_rng(5)
    table = ehrd_shaped(rng, 80, 400, 3, 8.0)
    rows = rng.permutation(80)
    assert_identical(gendiag(table, rows, 6, 3), frozen.gendiag(table, rows, k=6, m=3))
    assert_identical(
        gendiag(table, rows, 6, 2, full_queue=True),
        frozen.gendiag(table, rows, k=6, m=2, full_queue=True),
    )


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(5, 200),
    st.sampled_from([1, 2, 3, 10]),
    st.sampled_from([1, 2]),
)
def test_initial_q_by_matrix_and_by_sort_equal_the_python_one(seed, n, k, m) -> None:
    rng = np.random.default_rng(seed)
    table = ehrd_shaped(rng, n, int(rng.integers(20, 400)), 3, float(rng.uniform(2, 12)))
    rec, code = table.gather(rng.permutation(n))
    _, local = gendiag_module._compact(code, len(table.code_set))
    sup = np.bincount(local)
    want = sorted(gendiag_module.initial_q(k, m, sup, rec, local))
    for matrix_max in (0, 1 << 20):
        got = gendiag_kernel.initial_q(n, rec, local, sup, k, m, matrix_max)
        assert sorted(got.tolist()) == want
        # the loop reads them in order after a counting sort that relies on initial_q's order
        assert gendiag_kernel._sorted_keys(got, k).tolist() == want


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50)), max_size=300))
def test_q_heap_pops_in_heapq_order(ops) -> None:
    """Q's heap (pushes, pops, and a purge of dead items at the end) against ``heapq``."""
    import heapq

    q, qlen, want = np.empty(len(ops) + 1, dtype=np.int64), 0, []
    for push, value in ops:
        if push or not want:
            key = value << gendiag_kernel.ID_BITS | value % 7
            gendiag_kernel._q_push(q, qlen, key)
            qlen += 1
            heapq.heappush(want, key)
        else:
            assert q[0] == heapq.heappop(want)
            qlen -= 1
            q[0] = q[qlen]
            gendiag_kernel._q_sift_down(q, 0, qlen)
    alive = np.arange(51) % 3 > 0
    qlen = gendiag_kernel._q_purge(q, qlen, alive)
    want = sorted(key for key in want if alive[key >> gendiag_kernel.ID_BITS])
    got = []
    while qlen:
        got.append(int(q[0]))
        qlen -= 1
        q[0] = q[qlen]
        gendiag_kernel._q_sift_down(q, 0, qlen)
    assert got == want


def test_numpy_exp2_of_integers_is_the_table_the_compiled_ul_reads() -> None:
    """The compiled UL reads exp2(−i) from ``gendiag._POW2`` (0 beyond it): NumPy's exp2 must
    give those floats for integer arguments wherever they sit in an array (SIMD lanes and
    tails alike), or compiled and NumPy UL could differ in the last bit."""
    table = gendiag_module._POW2
    x = -np.arange(len(table) + 3000, dtype=np.float64)
    want = np.concatenate([table, np.zeros(3000)])
    for offset in range(9):
        for length in (1, 2, 3, 7, 8, 9, 16, 17, 33, len(x) - offset):
            got = np.exp2(x[offset : offset + length])
            assert np.array_equal(got, want[offset : offset + length])
    assert np.exp2(-1e6) == 0.0 and np.exp2(np.array([-1e6]))[0] == 0.0


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 120), st.integers(1, 300))
def test_compiled_ul_equals_record_ul(seed, n, d) -> None:
    """``unweighted_ul`` against NumPy's ``record_ul`` on random labellings (up to 300 items:
    masks of several words), sizes up to hundreds of codes (exp2 of large negative integers,
    down to 0)."""
    rng = np.random.default_rng(seed)
    per = rng.integers(0, 12, n)
    rec = np.repeat(np.arange(n), per)
    item = rng.integers(-1, d, len(rec))
    size = rng.choice([1, 2, 3, 40, 700, 1500], d)
    gen, dropped = gendiag_kernel.unweighted_ul(n, rec, item, size, gendiag_module._POW2)
    want_gen, want_sup = gendiag_module.record_ul(n, rec, item, size)
    assert np.array_equal(gen, want_gen)
    assert float(gen.sum()) == float(want_gen.sum())
    assert float(dropped) == float(want_sup.sum())


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(20, 300),
    st.sampled_from([2, 5, 10]),
    st.sampled_from([1, 2, 3]),
    st.booleans(),
)
def test_ul_batch_gives_each_clusters_gendiag_ul(seed, n, k, m, weighted) -> None:
    """The partner search's ULs (one compiled call for many clusters, or per-cluster GenDiag
    for weighted tables and m > 2) are exactly ``gendiag(...).ul``, in any share order."""
    rng = np.random.default_rng(seed)
    table = ehrd_shaped(rng, n, int(rng.integers(50, 800)), int(rng.integers(1, 18)), 6.0)
    if weighted:
        table = CodeTable(table.names, table.indptr, table.indices, table.code_set,
                          rng.choice([0.5, 1.0, 3.0], len(table.names)))
    clusters = [rng.permutation(n)[: int(rng.integers(1, n + 1))] for _ in range(7)]
    clusters.append(np.empty(0, dtype=np.int64))
    batch = gendiag_module.ULBatch(table, clusters, k, m)
    assert batch.compiled == (not weighted and m <= 2)
    order = rng.permutation(len(clusters))
    for share in np.array_split(order, 3):  # disjoint shares, as threads run them
        batch.run(share)
    assert batch.uls() == [gendiag(table, rows, k, m).ul for rows in clusters]
