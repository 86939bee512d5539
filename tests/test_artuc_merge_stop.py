"""The merging stop rule: ours sets a partnerless cluster aside, the paper stops (§4.1).

§4.1 of the ArtUC paper: "If C′UL exists, the two clusters are merged and the algorithm
attempts to merge another pair of clusters. Otherwise, the cluster merging stops."
``merge_stop="paper"`` does that; the default ``"exhaust"`` tries the next cluster and ends
when no merge is possible (Step 22's "until the set of clusters does not change").

On the paper's worked example (§4.2, Fig. 3) both give Fig. 3: after {0,1} ∪ {2,3} no
cluster has a partner within δ = 0.6. They part when the least-UL cluster is alone in its
group: give record 5 only the code 493.2 and {4, 5} (group G2, u4) has UL 0, is popped
first and has no partner — the paper's rule stops before {0,1} and {2,3} (G1) can merge.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ehr_release import registry
from ehr_release.algorithms.artuc import artuc, release_files
from ehr_release.configuration.constraints import rt_data
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.kkm import check_kkm
from tests.test_artuc_registry import PARAMS, mimic  # noqa: F401 - fixture
from tests.test_artuc_worked_example import ROWS, SEED, worked_example


def _clusters(anon) -> list[list[int]]:
    return sorted(sorted(int(r) for r in c.rows) for c in anon.clusters)


def test_both_rules_give_figure_3_on_the_papers_example() -> None:
    ds, cfg = worked_example()
    data = rt_data(ds, cfg)
    runs = {stop: artuc(data, cfg, k=2, m=2, delta=0.6, epsilon=2,
                        rng=np.random.default_rng(SEED), stop=stop)
            for stop in ("exhaust", "paper")}
    assert _clusters(runs["paper"]) == _clusters(runs["exhaust"]) == [[0, 1, 2, 3], [4, 5],
                                                                      [6, 7]]
    assert release_files(runs["paper"]) == release_files(runs["exhaust"])


def test_the_paper_stops_at_a_partnerless_cluster_ours_goes_on() -> None:
    rows = list(ROWS)
    rows[5] = (51, "Nigeria", "Male", "493.2")
    demo = pd.DataFrame([r[:3] for r in rows], columns=["age", "origin", "gender"])
    ds = Dataset.from_records([r[3].split() for r in rows], demo,
                              patient_ids=[str(i) for i in range(len(rows))])
    _, cfg = worked_example()
    data = rt_data(ds, cfg)

    def run(stop):
        return artuc(data, cfg, k=2, m=2, delta=0.6, epsilon=2,
                     rng=np.random.default_rng(SEED), stop=stop)

    ours, paper = run("exhaust"), run("paper")
    assert _clusters(ours) == [[0, 1, 2, 3], [4, 5], [6, 7]]
    assert _clusters(paper) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert paper.ul > ours.ul  # 493.2 of record 3 is suppressed in {2, 3} alone
    assert paper.suppressed_codes == 1 and ours.suppressed_codes == 0
    for anon in (ours, paper):
        report = check_kkm(release_files(anon), ds, cfg, algorithm="artuc",
                            k=2, m=2, delta=0.6, epsilon=2, constrained=True)
        assert report.holds, report.failures


def test_an_unknown_rule_is_refused() -> None:
    ds, cfg = worked_example()
    with pytest.raises(ValueError, match="stop must be one of"):
        artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
              rng=np.random.default_rng(SEED), stop="never")
    from ehr_release.core.errors import ParameterError

    with pytest.raises(ParameterError, match="'merge_stop' must be one of exhaust, paper"):
        registry.get("artuc").parse({**PARAMS, "merge_stop": "never"})


def test_the_registry_passes_the_rule_on(mimic) -> None:  # noqa: F811
    """On the MIMIC demo at δ = 0.4 the two rules give different releases; both verify."""
    entry = registry.get("artuc")
    out = {}
    for stop in ("exhaust", "paper"):
        params = entry.parse({**PARAMS, "compare": "false", "merge_stop": stop})
        out[stop] = entry.anonymize(mimic, params, np.random.default_rng(1))
        assert entry.verify(out[stop], mimic, params).holds
    assert out["paper"] != out["exhaust"]
    default = entry.parse({**PARAMS, "compare": "false"})
    assert entry.anonymize(mimic, default, np.random.default_rng(1)) == out["exhaust"]
