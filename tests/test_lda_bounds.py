"""LDA's pruning bounds never exceed the exact A-GS cost (property test).

The nearest search discards a candidate once a lower bound on its cost is above the best
exact cost found: a bound above the exact cost would silently change which trajectory joins
a cluster (and the release bytes). Representatives in the search are usually *generalized*
trajectories (the running A-GS result of a cluster), so the representatives drawn here are
raw trajectories and A-GS alignments of two or three of them.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.lda import make_model
from ehr_release.algorithms.lda.align import ags_align
from ehr_release.algorithms.lda.anonymize import encode
from ehr_release.algorithms.lda.cluster import _Pool, _Search
from ehr_release.algorithms.lda.model import LossModel
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.samples.sample import sample_vocabulary

CODES = [str(c) for c in sample_vocabulary().codes[:12]]
SLACK = 1e-9  # the search's own tolerance for sums taken in a different order


@cache
def _model(w_icd: float, leaf_count: int) -> LossModel:
    return make_model(icd9_hierarchy(), CODES, w_icd=w_icd, w_age=1 - w_icd,
                      leaf_count=leaf_count)


_pair = st.tuples(st.sampled_from(CODES), st.integers(28, 47))
_traj = st.lists(_pair, max_size=9, unique=True).map(
    lambda t: sorted(t, key=lambda p: (p[1], p[0])))


@st.composite
def cases(draw):
    model = _model(draw(st.sampled_from([0.5, 0.2, 0.8, 1.0, 0.0])), draw(st.sampled_from([0, 1])))
    trajs = encode(model, draw(st.lists(_traj, min_size=1, max_size=25)))
    rep = trajs[draw(st.integers(0, len(trajs) - 1))]
    for _ in range(draw(st.integers(0, 2))):  # a cluster's running representative
        out = ags_align(model, rep, trajs[draw(st.integers(0, len(trajs) - 1))])
        rep = (out.icd, out.age)
    return model, trajs, rep


@settings(max_examples=300, deadline=None)
@given(cases())
def test_bounds_never_exceed_the_exact_cost(case):
    model, trajs, rep = case
    pool = _Pool(trajs, model)
    search = _Search(pool, model, "ags")
    cv = search.value_costs(rep)
    alive = pool.alive()
    exact = search.exact(rep, alive, cv)
    bounds = {"quick": search._quick_bounds(rep, cv, alive),
              "tight": search._tight_bounds(rep, cv, alive)}
    for name, bound in bounds.items():
        worst = int(np.argmax(bound - exact))
        assert bound[worst] <= exact[worst] + SLACK, (name, bound[worst], exact[worst])
