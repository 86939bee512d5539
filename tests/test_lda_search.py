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
from ehr_release.algorithms.lda.align import Batch, ags_align, ags_costs
from ehr_release.algorithms.lda.anonymize import encode
from ehr_release.algorithms.lda.cluster import _Pool, _Search
from ehr_release.hierarchy import icd9_hierarchy
from ehr_release.sample import sample_vocabulary

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
