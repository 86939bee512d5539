"""``DemographicSpace.join_many`` is ``join`` applied to each box, field by field.

ArtUC's merge step joins the popped cluster with every cluster of its group at once; the
boxes (release values) and their NCP must be exactly those of one join at a time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.algorithms.artuc.space import DemographicSpace
from ehr_release.configuration.constraints import rt_data
from ehr_release.parameters.params import parse_params
from ehr_release.registry.artuc import config_of
from ehr_release.samples.sample import generate_sample

ROOT = Path(__file__).resolve().parents[1]
_SPACE: list[DemographicSpace] = []


def space() -> DemographicSpace:
    if not _SPACE:
        params = parse_params(
            registry.get("artuc").params,
            {
                "k": "5",
                "m": "2",
                "delta": "0.3",
                "epsilon": "6%",
                "config": str(ROOT / "examples/artuc-mimic/config.yaml"),
            },
        )
        cfg = config_of(params)
        _SPACE.append(DemographicSpace(cfg, rt_data(generate_sample(300, seed=3), cfg)))
    return _SPACE[0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, 299), min_size=1, max_size=12, unique=True), min_size=1, max_size=15
    )
)
def test_join_many_equals_join_one_at_a_time(groups: list[list[int]]) -> None:
    s = space()
    boxes = [s.box_of(np.array(g)) for g in groups]
    first, others = boxes[0], boxes[1:]
    many = s.join_many(first, others)
    assert len(many) == len(others)
    for got, other in zip(many, others, strict=True):
        want = s.join(first, other)
        for name in ("low", "high", "nodes"):
            assert getattr(got, name).dtype == getattr(want, name).dtype
            assert np.array_equal(getattr(got, name), getattr(want, name)), name
        assert s.ncp(got) == s.ncp(want)
        assert got.key() == want.key()
