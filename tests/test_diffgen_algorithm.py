"""Properties of Algorithm 1 on random small datasets (seeded test-mode noise).

Whatever the data, ε, h, score and budget policy: the verifier accepts the release, the
ledger spends exactly ε (or ε/2 + used ε' with ``discard``), every group appears with every
class, counts are integers ≥ 0, and every record still in the release generalizes to exactly
one released group under the released cut.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.diffgen import (
    DiffGenParams,
    encode_dataset,
    noise_source,
    run_diffgen,
)
from ehr_release.algorithms.diffgen.generalize import generalize
from ehr_release.algorithms.diffgen.release import cut_document, release_files
from ehr_release.configuration.taxonomies import load_config
from ehr_release.privacy.diffgen import verify
from tests.test_diffgen_table1 import TABLE1_YAML, table1_config_path, table1_dataset

CODES = ["11", "12", "21", "22"]

records = st.lists(
    st.tuples(st.sampled_from(["Male", "Female"]), st.integers(18, 65),
              st.lists(st.sampled_from(CODES), max_size=4, unique=True),
              st.sampled_from(["Y", "N"])),
    min_size=1, max_size=40)


@pytest.fixture(scope="module")
def config_path(tmp_path_factory) -> Path:
    return table1_config_path(tmp_path_factory.mktemp("cfg"))


def _dataset(rows):
    return table1_dataset([(i + 1, s, a, c, y) for i, (s, a, c, y) in enumerate(rows)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=records, eps=st.sampled_from([Fraction(1, 10), Fraction(1), Fraction(3, 2)]),
       h=st.integers(1, 7), score=st.sampled_from(["max", "infogain"]),
       policy=st.sampled_from(["final-counts", "discard"]), seed=st.integers(0, 2**16))
def test_any_run_is_verified_and_spends_what_the_policy_says(config_path, rows, eps, h,
                                                             score, policy, seed) -> None:
    config = load_config(str(config_path))
    data = _dataset(rows)
    enc = encode_dataset(data, config)
    params = DiffGenParams(eps, h, score, policy)
    result = run_diffgen(enc, params, noise_source(seed, np.random.default_rng(seed)))
    ledger = result.ledger
    final = ledger.charges[-1]
    assert final.phase == "final-counts"
    if policy == "final-counts":
        assert ledger.spent() == eps
    else:
        assert final.epsilon == eps / 2 and ledger.spent() <= eps

    groups = result.groups
    assert (groups["count"] >= 0).all() and groups["count"].dtype.kind == "i"
    assert len(groups) % 2 == 0 and (groups.groupby(["sex", "age", "codes"]).size() == 2).all()

    cut_doc = cut_document(result, config, params)
    labels = generalize(enc, cut_doc)
    kept = result.state.pid >= 0
    keys = set(map(tuple, groups[["sex", "age", "codes"]].to_numpy()))
    assert all(tuple(r) in keys for r in labels.loc[kept, ["sex", "age", "codes"]].to_numpy())

    report = verify(release_files(result, config, params), data,
                    {"epsilon": float(eps), "h": h, "score": score, "unused_budget": policy,
                     "taxonomies": str(config_path), "seed": seed})
    assert report.holds, report.to_dict()


def test_h_beyond_the_available_specializations_stops_early(tmp_path) -> None:
    text = TABLE1_YAML.split("numerical:")[0] + "categorical:\n  sex:\n    Any_Sex: [Male, " \
        "Female]\n"
    path = table1_config_path(tmp_path, text)
    config = load_config(str(path))
    data = table1_dataset()
    params = DiffGenParams(Fraction(1), 5)
    result = run_diffgen(encode_dataset(data, config), params, noise_source(1))
    selections = [c for c in result.ledger.charges if c.phase == "selection"]
    assert len(selections) == 1  # only Any_Sex can be specialized
    assert any("stopped early" in e["event"] for e in result.ledger.events)
    assert result.ledger.spent() == 1  # the skipped steps' budget went to the final counts
    assert result.ledger.charges[-1].epsilon == 1 - Fraction(1, 20)
    report = verify(release_files(result, config, params), data,
                    {"epsilon": 1.0, "h": 5, "taxonomies": str(path), "seed": 1})
    assert report.holds, report.to_dict()


def test_three_classes_use_log2_3_as_infogain_sensitivity(tmp_path) -> None:
    path = table1_config_path(tmp_path, TABLE1_YAML.replace('["Y", "N"]', '["Y", "N", "M"]'))
    config = load_config(str(path))
    rows = [(i + 1, "Male" if i % 2 else "Female", 20 + i, ["11"], "YNM"[i % 3])
            for i in range(30)]
    data = table1_dataset(rows)
    params = DiffGenParams(Fraction(1), 3, "infogain")
    result = run_diffgen(encode_dataset(data, config), params, noise_source(2))
    sens = {c.sensitivity for c in result.ledger.charges if c.mechanism == "exponential"}
    assert len(sens) == 1 and float(sens.pop()) >= np.log2(3)
    report = verify(release_files(result, config, params), data,
                    {"epsilon": 1.0, "h": 3, "score": "infogain",
                     "taxonomies": str(path), "seed": 2})
    assert report.holds, report.to_dict()


def test_production_noise_runs_without_a_seed(config_path) -> None:
    config = load_config(str(config_path))
    params = DiffGenParams(Fraction(1, 2), 3)
    result = run_diffgen(encode_dataset(table1_dataset(), config), params, noise_source(None))
    assert result.ledger.spent() == Fraction(1, 2)
    files = release_files(result, config, params, "parquet")
    assert set(files) == {"groups.parquet", "cut.json", "ledger.json"}
    report = verify(files, table1_dataset(), {"epsilon": 0.5, "h": 3,
                                              "taxonomies": str(config_path)})
    assert report.holds, report.to_dict()
