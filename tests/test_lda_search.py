"""LDA's fast paths give the answers of the slow ones they replace.

The clustering never searches exhaustively: A-GS costs come from a vectorized row scan, and
nearest/farthest are pruned by lower and upper bounds. These tests compare each against the
plain version on random data: the one-pair dynamic programme with traceback, and argmin /
argmax over every remaining candidate (ties to the first trajectory).
"""

from __future__ import annotations

import numpy as np
import pytest

from ehr_release.algorithms.lda import make_model
from ehr_release.algorithms.lda.align import Batch, ags_align, ags_costs, scan_costs
from ehr_release.algorithms.lda.anonymize import encode
from ehr_release.algorithms.lda.cluster import _Pool, _Search
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.samples.sample import sample_vocabulary

CODES = [str(c) for c in sample_vocabulary().codes[:12]]


def _trajectories(rng: np.random.Generator, n: int) -> list[list[tuple[str, int]]]:
    out = []
    for _ in range(n):
        size = int(rng.integers(0, 7))
        pairs = {(CODES[int(rng.integers(len(CODES)))], int(rng.integers(30, 45)))
                 for _ in range(size)}
        out.append(sorted(pairs, key=lambda p: (p[1], p[0])))
    return out


def _setup(seed: int, n: int, w_icd: float = 0.5):
    rng = np.random.default_rng(seed)
    raw = _trajectories(rng, n)
    raw += [raw[i] for i in rng.integers(0, n, n // 4)]  # repeats: the pool deduplicates
    model = make_model(icd9_hierarchy(), CODES, w_icd=w_icd, w_age=1 - w_icd)
    return rng, model, encode(model, raw)


@pytest.mark.parametrize("seed", range(6))
def test_batched_scan_equals_the_one_pair_programme(seed):
    _, model, trajs = _setup(seed, 40, w_icd=[0.5, 0.2, 0.9][seed % 3])
    for x in trajs[:10]:
        fast = ags_costs(model, x, Batch.of(trajs, model))
        slow = [model.objective(a.d_icd, a.d_age)
                for a in (ags_align(model, x, y) for y in trajs)]
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_compiled_costs_are_the_bits_of_the_numpy_scan(seed):
    """The search's compiled exact costs decide ties between candidates: they must be the
    very floats of the vectorized scan over the same per-value table (same additions, same
    order), not merely close."""
    rng, model, trajs = _setup(200 + seed, 40, w_icd=[0.5, 0.2, 0.9][seed % 3])
    pool = _Pool(trajs, model)
    search = _Search(pool, model, "ags")
    alive = pool.alive()
    ui, ai = pool.value_code_index[:-1], pool.value_age_index[:-1]
    reps = [trajs[int(i)] for i in rng.integers(0, len(trajs), 6)]
    out = ags_align(model, reps[0], reps[1])
    for rep in reps + [(out.icd, out.age)]:  # raw and generalized representatives
        cv = search.value_costs(rep)
        # gen[h, v] = (x side + value side) − the value's suppression; padding costs nothing
        gen = np.zeros((len(rep[0]), pool.padding + 1))
        gen[:, :-1] = ((cv.icd_x[:, ui] + cv.age_x[:, ai]) + (cv.icd_y[:, ui] + cv.age_y[:, ai])
                       - pool.sup_v[:-1])
        cols = pool.columns(alive)
        scanned = scan_costs(gen[:, cols], cv.sup_x, pool.sup_v[cols], pool.lens[alive],
                             shifted=True)
        np.testing.assert_array_equal(search.exact(rep, alive, cv), scanned)
        close = ags_costs(model, rep, Batch.of([pool.trajs[d] for d in alive], model))
        np.testing.assert_allclose(scanned, close, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_pruned_nearest_and_farthest_equal_exhaustive_search(seed):
    rng, model, trajs = _setup(100 + seed, 60, w_icd=[0.5, 0.3, 0.8, 1.0][seed % 4])
    pool = _Pool(trajs, model)
    search = _Search(pool, model, "ags")
    checked = 0
    while len(pool.alive()) > 1:
        alive = pool.alive()
        rep = trajs[int(rng.integers(len(trajs)))]  # any trajectory can be a representative
        exact = search.exact(rep, alive, search.value_costs(rep))
        want = int(alive[np.lexsort((alive, exact))[0]])
        assert search.nearest(rep) == want
        f = int(np.argmax(pool.left))
        far = search.exact(pool.trajs[f], alive, search.value_costs(pool.trajs[f]))
        assert search.farthest(f) == int(alive[np.lexsort((alive, -far))[0]])
        pool.take(int(alive[int(rng.integers(len(alive)))]))
        checked += 1
    assert checked >= 10
