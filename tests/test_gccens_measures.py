"""GCCens utility figures the thesis reports (§III.6–III.7, Figure 1d, Tables 1–2)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.gccens import PopulationIndex, gccens
from ehr_release.utility.gccens import evaluate_censoring

# Spec §1 example (thesis Example 1, Figure 1): k = 2, caps 250:2, 272:2, 401:0, 724:1.
POPULATION = [Counter(r) for r in (["250", "250", "272"], ["250", "272"], ["250"], ["401"],
                                   ["272", "272", "724"], ["250"], ["272", "724"])]
SAMPLE = [Counter(r) for r in (["250"], ["272", "272", "724"], ["250", "250", "272"])]
CAPS = {"250": 2, "272": 2, "401": 0, "724": 1}


def test_worked_example_codes_kept_per_record_and_pooled():
    """Figure 1d: CUL 0, 1/3, 1/3. The thesis' 'retained … of the ICD codes on average'
    is 1 − mean CUL = 7/9; pooling the 7 capped instances (5 kept) gives 5/7 instead;
    'modified … of the records' is 2 of 3."""
    result = gccens(SAMPLE, POPULATION, 2, CAPS)
    report = evaluate_censoring(result.released, SAMPLE, PopulationIndex(POPULATION), 2, CAPS,
                                chart=False)
    m = report.metrics
    assert m["CUL mean"] == pytest.approx(2 / 9)
    assert m["mean share of codes kept per record"] == pytest.approx(7 / 9)
    assert m["share of capped codes kept"] == pytest.approx(5 / 7)
    assert m["share of records censored"] == pytest.approx(2 / 3)
    assert m["share below k after"] == 0.0
    assert any("1 − CUL mean" in n for n in report.notes)


records = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(1, 3),
                                   max_size=3), min_size=1, max_size=6)


@settings(max_examples=80, deadline=None)
@given(records, st.integers(2, 4))
def test_kept_per_record_is_the_mean_of_each_records_kept_share(population, k):
    """1 − mean CUL computed independently: each record's kept / capped instances."""
    population = [Counter(r) for r in population]
    k = min(k, len(population))
    sample = population[: max(1, len(population) // 2)]
    caps = {"a": 2, "b": 3, "c": 1}
    result = gccens(sample, population, k, caps)
    report = evaluate_censoring(result.released, sample, PopulationIndex(population), k, caps,
                                chart=False)
    capped = [{c: min(n, caps[c]) for c, n in r.items()} for r in sample]
    shares = [sum(rel.values()) / sum(cap.values()) if sum(cap.values()) else 1.0
              for cap, rel in zip(capped, result.released, strict=True)]
    assert report.metrics["mean share of codes kept per record"] == pytest.approx(
        float(np.mean(shares)))
