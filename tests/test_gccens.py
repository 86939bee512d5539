"""GCCens: the spec's worked example, the index, and the loop's decisions."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from ehr_release.algorithms.gccens import PopulationIndex, gccens, resolve_caps
from ehr_release.algorithms.gccens import index as index_module
from ehr_release.core.errors import ParameterError
from ehr_release.utility.gccens import cul_values, describe

# Spec §1 example (thesis Figure 1): k = 2, caps 250:2, 272:2, 401:0, 724:1.
POPULATION = [Counter(r) for r in (["250", "250", "272"], ["250", "272"], ["250"], ["401"],
                                   ["272", "272", "724"], ["250"], ["272", "724"])]
SAMPLE = [Counter(r) for r in (["250"], ["272", "272", "724"], ["250", "250", "272"])]
CAPS = {"250": 2, "272": 2, "401": 0, "724": 1}


def brute_dis(population, record) -> int:
    return sum(all(p.get(c, 0) >= n for c, n in record.items()) for p in population)


def test_worked_example_output_caps_and_cul():
    result = gccens(SAMPLE, POPULATION, 2, CAPS)
    assert result.released == [{"250": 1}, {"272": 1, "724": 1}, {"250": 1, "272": 1}]
    assert result.final_caps == {"250": 1, "272": 1, "401": 0, "724": 1}
    assert result.steps == [("250", 1), ("272", 1)]  # thesis: 250 first, then 272
    cul = cul_values(result.capped, result.released)
    assert cul == pytest.approx([0, 1 / 3, 1 / 3])


def test_worked_example_distinguishability():
    idx = PopulationIndex(POPULATION)
    assert idx.dis({"272": 1, "724": 1}) == 2  # thesis: p5 and p7
    assert idx.dis({"250": 2, "272": 1}) == 1
    assert idx.dis({"272": 2, "724": 1}) == 1
    assert idx.dis({}) == len(POPULATION)
    assert idx.dis({"999": 1}) == 0


@pytest.mark.parametrize("dense_share", [0.0, 1.0, 1 / 32])
def test_index_matches_brute_force_for_bitsets_and_lists(monkeypatch, dense_share):
    monkeypatch.setattr(index_module, "DENSE_SHARE", dense_share)
    rng = np.random.default_rng(3)
    codes = ["a", "b", "c", "d", "e"]
    weights = [0.9, 0.6, 0.3, 0.05, 0.01]  # frequent and rare codes
    population = [Counter({c: int(rng.integers(1, 4)) for c, w in zip(codes, weights, strict=True)
                           if rng.random() < w}) for _ in range(300)]
    idx = PopulationIndex(population)
    for combo in itertools.product(range(3), repeat=len(codes)):
        record = {c: n for c, n in zip(codes, combo, strict=True) if n}
        assert idx.dis(record) == brute_dis(population, record), record


def test_index_restricted_to_codes_counts_others_as_absent():
    idx = PopulationIndex(POPULATION, codes=["250"])
    assert idx.dis({"250": 1}) == 4
    assert idx.dis({"272": 1}) == 0


def test_caps_resolution_given_default_and_sample_maximum():
    sample = [{"250": 4, "272": 1}, {"272": 3, "724": 2}]
    assert resolve_caps(sample, {}) == {"250": 4, "272": 3, "724": 2}
    assert resolve_caps(sample, {"*": 2, "250": 1}) == {"250": 1, "272": 2, "724": 2}
    assert resolve_caps(sample, {"401": 0}) == {"250": 4, "272": 3, "401": 0, "724": 2}


def test_cap_zero_codes_are_removed_and_never_chosen():
    population = [Counter({"401": 3})] * 5 + [Counter({"250": 1})] * 5
    sample = [Counter({"401": 3, "250": 1})]
    result = gccens(sample, population, 2, {"401": 0})
    assert result.released == [{"250": 1}]
    assert result.steps == []  # capping alone made it 2-mapped
    assert result.final_caps["401"] == 0


def test_caps_are_clamped_to_what_the_sample_holds():
    # cap 5 for 250 but nobody has more than 2: the first step must already remove something
    population = [Counter({"250": 1})] * 3 + [Counter({"250": 2})]
    result = gccens([Counter({"250": 2})], population, 3, {"250": 5})
    assert result.released == [{"250": 1}]
    assert result.final_caps == {"250": 1}
    assert result.steps == [("250", 1)]


def test_ties_go_to_the_lowest_code():
    population = [Counter({"b": 1, "a": 1})] + [Counter({"a": 1}), Counter({"b": 1})] * 3
    result = gccens([Counter({"a": 1, "b": 1})], population, 2, {})
    assert result.steps[0][0] == "a"
    assert result.released == [{"b": 1}]


def test_everything_censored_when_only_the_empty_record_is_safe():
    population = [Counter({"a": 1}), Counter({"b": 1}), Counter()]
    result = gccens([Counter({"a": 1}), Counter({"b": 1})], population, 3, {})
    assert result.released == [{}, {}]
    assert cul_values(result.capped, result.released) == pytest.approx([1, 1])


def test_k_above_population_size_and_negative_caps_are_refused():
    with pytest.raises(ParameterError, match="population size"):
        gccens(SAMPLE, POPULATION, 8, CAPS)
    with pytest.raises(ParameterError, match="caps"):
        gccens(SAMPLE, POPULATION, 2, {"250": -1})
    with pytest.raises(ParameterError, match="'k'"):
        gccens(SAMPLE, POPULATION, 0, CAPS)


def test_cul_statistics():
    stats = describe(np.array([0.0, 0.0, 0.0, 1.0]))
    assert stats["mean"] == pytest.approx(0.25)
    assert stats["median"] == 0.0
    assert stats["std"] == pytest.approx(np.sqrt(0.1875))
    assert stats["skewness"] == pytest.approx(1.1547005, rel=1e-6)  # positive: most kept
    assert describe(np.zeros(4))["skewness"] == 0.0
