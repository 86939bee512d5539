"""Code weights w(ũ) of UL (Def. 5 of the ArtUC paper: UL(ũ) = (2^|ũ| − 1)·w(ũ)).

The paper's Example 4 computes record 6 of Fig. 3 "assuming that the weight of each
generalized diagnosis code is 1": UL = (0 + 3)/(2^3 − 1) = 3/7. With u1's code set weighted
w, (458.1, 458.21) costs 3w, so record 6 costs 3w/7 — in the evaluation and in GenDiag
alike. Weights are per utility constraint's code set (``code_weight:`` in the configuration,
or the ``code_weights`` parameter); 1 everywhere is today's UL, bit for bit.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.algorithms.artuc import artuc, release_files
from ehr_release.algorithms.artuc.artuc import _setup
from ehr_release.algorithms.artuc.gendiag import gendiag
from ehr_release.configuration.constraints import parse_config, rt_data, with_code_weights
from ehr_release.core.errors import ConfigError, ParameterError
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.privacy.kkm import suppressed_occurrences
from ehr_release.utility.artuc import Release, record_ul
from tests.test_artuc_properties import ATTRS, _dataset, records
from tests.test_artuc_registry import PARAMS, mimic  # noqa: F401 - fixture
from tests.test_artuc_worked_example import (
    CONFIG,
    SEED,
    release_line,
    release_of,
    worked_example,
)


def _weighted(**weights: float):
    raw = copy.deepcopy(CONFIG)
    for u in raw["constraints"]:
        if u["name"] in weights:
            u["code_weight"] = weights[u["name"]]
    return parse_config(raw, lambda ref: pytest.fail(ref))


RECORD_6 = release_line("B", [44, 47], "All", "All", [["494.1"], ["458.1", "458.21"]])


@pytest.mark.parametrize("w", [1.0, 0.5, 0.0])
def test_example_4_record_6_costs_3w_over_7(w) -> None:
    cfg = _weighted(u1=w)
    release = Release.parse(release_of(RECORD_6))
    assert record_ul(release, cfg.code_weights())[0] == pytest.approx(3 * w / 7)


@pytest.mark.parametrize("w", [1.0, 0.5])
def test_gendiag_weighs_the_cluster_of_records_6_and_7(w) -> None:
    """The spec's trace: GenDiag UL of {6, 7} is 0.857 = 2·3/7 with weights 1."""
    ds, _ = worked_example()
    cfg = _weighted(u1=w)
    _, table, _ = _setup(rt_data(ds, cfg), cfg, constrained=True)
    assert gendiag(table, np.array([6, 7]), k=2, m=2).ul == pytest.approx(6 * w / 7)
    assert (table.weight is None) == (w == 1.0)  # weight 1: the unweighted code path


def test_weights_of_1_keep_the_release_bytes() -> None:
    ds, cfg = worked_example()
    plain = artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                  rng=np.random.default_rng(SEED))
    ones = _weighted(u1=1, u2=1.0, u3=1, u4=1)
    assert ones.code_weights() == {}
    again = artuc(rt_data(ds, ones), ones, k=2, m=2, delta=0.6, epsilon=2,
                  rng=np.random.default_rng(SEED))
    assert release_files(again) == release_files(plain) and again.ul == plain.ul


def test_bad_or_conflicting_weights_are_refused() -> None:
    with pytest.raises(ConfigError, match="code_weight: must be a number in \\[0, 1\\]"):
        _weighted(u1=1.5)
    raw = copy.deepcopy(CONFIG)
    raw["constraints"].append({"name": "u5", "age": 51, "origin": "Africa", "gender": "Male",
                               "codes": ["493.2"], "code_weight": 0.5})
    raw["constraints"][3]["code_weight"] = 0.2
    with pytest.raises(ConfigError, match="give their code set .* the weights 0.2 and 0.5"):
        parse_config(raw, lambda ref: pytest.fail(ref))
    _, cfg = worked_example()
    with pytest.raises(ParameterError, match="names no constraint"):
        with_code_weights(cfg, "u9=0.5")
    with pytest.raises(ParameterError, match="weights in \\[0, 1\\]"):
        with_code_weights(cfg, "u1=2")
    assert with_code_weights(cfg, "u1=0.25,u4=0").code_weights() == {
        "458.1": 0.25, "458.21": 0.25, "493.2": 0.0}


def test_a_template_name_weighs_every_constraint_it_expands_into() -> None:
    cfg = parse_config({"attributes": ATTRS, "constraints": [
        {"name": "bands", "age": {"bands": 20, "from": 0, "to": 60}, "codes": "chapters"}]},
        lambda ref: icd9_hierarchy())
    weighted = with_code_weights(cfg, "bands=0.5")
    assert {u.codes.weight for u in weighted.constraints} == {0.5}


@settings(max_examples=25, deadline=None)
@given(rows=records, w=st.sampled_from([0.0, 0.3, 0.5, 1.0]), seed=st.integers(0, 2**16))
def test_anonymizer_and_evaluation_agree_on_weighted_ul(rows, w, seed) -> None:
    """GenDiag's UL (algorithms/) and the evaluation's UL of the published bytes
    (utility/) are separate code; with weights they must still give the same UL(D̃)."""
    ds = _dataset(rows)
    cfg = parse_config({"attributes": ATTRS, "constraints": [
        {"name": "heavy", "age": [0, 29], "codes": "chapters", "code_weight": w},
        {"name": "light", "age": [30, 60], "codes": "chapters", "code_weight": w}]},
        lambda ref: icd9_hierarchy())
    data = rt_data(ds, cfg)
    anon = artuc(data, cfg, k=2, m=2, delta=1.0, epsilon=1e9, rng=np.random.default_rng(seed))
    files = release_files(anon)
    gen = record_ul(Release.parse(files), cfg.code_weights())
    lost = suppressed_occurrences(files, data, cfg)
    released = float(gen.mean()) + lost / len(gen) if len(gen) else 0.0
    assert released == pytest.approx(anon.ul)


def test_code_weights_parameter_changes_the_reported_ul(mimic) -> None:  # noqa: F811
    entry = registry.get("artuc")
    params = entry.parse({**PARAMS, "compare": "false"})
    files = entry.anonymize(mimic, params, np.random.default_rng(1))
    plain = entry.evaluate(files, mimic, params, np.random.default_rng(2))
    zero = entry.parse({**PARAMS, "compare": "false", "code_weights": "by-age-and-insurance=0"})
    weighted = entry.evaluate(files, mimic, zero, np.random.default_rng(2))
    assert plain.metrics["UL generalization"] > 0
    assert weighted.metrics["UL generalization"] == 0.0
    assert weighted.metrics["UL suppression"] == plain.metrics["UL suppression"]
