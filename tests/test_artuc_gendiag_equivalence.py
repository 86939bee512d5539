"""The optimized GenDiag returns exactly what the frozen pre-optimization copy returns.

``tests/artuc_gendiag_reference.py`` is GenDiag as it was before it was sped up. Every field
of the result (item ids included, so every tie-break) must be identical, on small random
clusters (hypothesis) and on mid-size clusters shaped like the benchmark's EHRD data (Zipf
codes, a main chapter per patient, ~16 codes per patient, code sets = chapters).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.artuc import gendiag_queues
from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.gendiag import gendiag
from tests import artuc_gendiag_reference as frozen


def assert_same(table: CodeTable, rows: np.ndarray, k: int, m: int, full: bool = False) -> None:
    got = gendiag(table, rows, k=k, m=m, full_queue=full)
    want = frozen.gendiag(table, rows, k=k, m=m, full_queue=full)
    for name in ("rows", "rec", "code", "item"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert got.items == want.items
    assert got.ul_generalization == want.ul_generalization
    assert got.ul_suppression == want.ul_suppression
    assert got.suppressed == want.suppressed


def table_of(records: list[list[int]], code_set: list[int]) -> CodeTable:
    names = [f"c{c:05d}" for c in range(len(code_set))]
    used = sorted({c for r in records for c in r})
    sets = {names[c]: code_set[c] for c in used}
    return CodeTable.build([frozenset(names[c] for c in r) for r in records], sets)


@st.composite
def small_clusters(draw: st.DrawFn) -> tuple[CodeTable, np.ndarray, int, int, bool]:
    vocab = draw(st.integers(1, 14))
    code_set = draw(st.lists(st.integers(0, 3), min_size=vocab, max_size=vocab))
    k = draw(st.integers(2, 6))
    records = draw(st.lists(st.lists(st.integers(0, vocab - 1), max_size=7, unique=True),
                            min_size=1, max_size=30))
    rows = draw(st.permutations(range(len(records))))
    rows = rows[:draw(st.integers(1, len(rows)))]
    m = draw(st.integers(1, 3))
    full = draw(st.booleans())
    return table_of(records, code_set), np.array(rows, dtype=np.int64), k, m, full


@settings(max_examples=400, deadline=None)
@given(small_clusters())
def test_small_random_clusters_match_the_frozen_copy(case) -> None:
    table, rows, k, m, full = case
    assert_same(table, rows, k, m, full)


def ehrd_shaped(rng: np.random.Generator, n: int, vocab: int, chapters: int,
                mean: float) -> CodeTable:
    """Zipf codes, half of each patient's codes from its main chapter (like bench/artuc)."""
    weight = (np.arange(vocab) + 10.0) ** -1.05
    chapter = rng.integers(0, chapters, vocab)
    per = np.maximum(1, rng.poisson(mean, n))
    main = rng.integers(0, chapters, n)
    records = []
    for i in range(n):
        pool = np.flatnonzero(chapter == main[i])
        own = rng.choice(pool, per[i] // 2, p=weight[pool] / weight[pool].sum()) \
            if len(pool) else np.empty(0, dtype=np.int64)
        rest = rng.choice(vocab, per[i] - len(own), p=weight / weight.sum())
        records.append(sorted(set(own.tolist()) | set(rest.tolist())))
    return table_of(records, chapter.tolist())


MID_SIZE = pytest.mark.parametrize(("seed", "n", "vocab", "chapters", "mean", "k", "m"), [
    (1, 60, 800, 17, 16.0, 10, 2),
    (2, 120, 2000, 17, 16.0, 10, 2),
    (3, 400, 4000, 17, 16.0, 10, 2),
    (4, 300, 3000, 17, 16.0, 5, 2),
    (5, 300, 3000, 17, 16.0, 10, 1),
    (6, 200, 600, 5, 4.0, 3, 2),
    (7, 250, 300, 1, 6.0, 4, 2),
    (8, 150, 1500, 17, 16.0, 2, 2),
    (9, 80, 400, 3, 8.0, 6, 3),
])


@MID_SIZE
def test_mid_size_clusters_match_the_frozen_copy(seed, n, vocab, chapters, mean, k, m) -> None:
    rng = np.random.default_rng(seed)
    table = ehrd_shaped(rng, n, vocab, chapters, mean)
    rows = rng.permutation(n)
    assert_same(table, rows, k, m)
    half = np.sort(rows[: n // 2])
    assert_same(table, half, k, m)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(20, 150), st.sampled_from([2, 3, 5, 10]),
       st.sampled_from([1, 2]))
def test_random_ehrd_shaped_clusters_match_the_frozen_copy(seed, n, k, m) -> None:
    rng = np.random.default_rng(seed)
    table = ehrd_shaped(rng, n, int(rng.integers(50, 1500)), int(rng.integers(1, 18)),
                        float(rng.uniform(2, 18)))
    assert_same(table, rng.permutation(n), k, m)


@MID_SIZE
def test_purging_q_at_every_pop_changes_nothing(monkeypatch, seed, n, vocab, chapters, mean,
                                                k, m) -> None:
    """Q drops dead entries only now and then (big clusters); here after every pop."""
    monkeypatch.setattr(gendiag_queues, "_PURGE_EVERY", 1)  # read where the queues live
    monkeypatch.setattr(gendiag_queues, "_PURGE_WHEN_ALIVE", 1.0)
    rng = np.random.default_rng(seed)
    table = ehrd_shaped(rng, n, vocab, chapters, mean)
    assert_same(table, rng.permutation(n), k, m)
