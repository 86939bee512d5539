"""Utility of disassociated releases: ARE, MRE, the per-chunk estimator and the comparator."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.disassociation import (
    disassociate,
    disassociate_dataset,
    encode_code_sets,
    reconstruct,
)
from ehr_release.configuration.policies import UtilityPolicy, hierarchy_policy
from ehr_release.model.dataset import Dataset
from ehr_release.samples.sample import generate_sample
from ehr_release.utility.bitsets import code_bitsets
from ehr_release.utility.disassociation import (
    BitsetCounter,
    ReleaseEstimator,
    are,
    evaluate_release,
    mre,
    w1_workload,
    w2_workload,
    within,
)
from ehr_release.utility.generalization_baseline import gendiag
from ehr_release.utility.reconstruction_sampler import ReconstructionSampler
from tests.test_disassociation_algorithm import assert_reconstruction_fits
from tests.test_disassociation_example import POLICY, RECORDS


def test_are_skips_zero_truths():
    assert are([10, 4, 0], [12, 3, 5]) == pytest.approx((0.2 + 0.25) / 2)
    assert math.isnan(are([0], [1]))


def test_mre_is_signed_percent_and_bands():
    values = mre([100, 50, 0], [97.5, 55, 3])
    assert values.tolist() == pytest.approx([2.5, -10.0])
    assert within(values, 2.5) == 0.5 and within(values, 10) == 1.0


def test_bitset_counter():
    counter = BitsetCounter([{"a", "b"}, {"a"}, {"c"}])
    assert counter.count(("a",)) == 2 and counter.count(("a", "b")) == 1
    assert counter.count(("z",)) == 0 and counter.count(()) == 0
    assert counter.matches({"b", "c"}) == 2


@pytest.fixture(scope="module")
def example_release():
    records = [r.split() for r in RECORDS]
    enc = encode_code_sets(records)
    result = disassociate(enc, 3, 2, enc.constraint_ids(POLICY.constraint_of()),
                          np.random.default_rng(0), max_cluster_size=6)
    return records, result.release


@pytest.mark.parametrize("query, expected", [
    (("296.00", "296.01"), 4.0),               # inside one record chunk: exact
    (("692.71", "695.10"), 3.0),
    (("296.01", "692.71"), 5 * 0.8 * 0.8),     # two chunks of P1
    (("401.0",), 1.0),                          # item chunk: one record
    (("834.0",), 4.0),                          # shared chunk over the joint cluster
    (("834.0", "944.01"), 3.0),
    (("296.01", "834.0"), 5 * 0.8 * 0.4),       # record chunk × shared chunk
    (("296.03", "404.00"), 5 * 0.8 * 0.2),     # record chunk × item chunk of P2
    (("296.00", "294.10"), 0.0),                # never in one cluster
])
def test_estimator_on_the_worked_example(example_release, query, expected):
    _, release = example_release
    assert ReleaseEstimator(release).count(query) == pytest.approx(expected)


def test_estimator_is_exact_inside_record_chunks():
    ds = generate_sample(300, seed=5)
    records = ds.code_sets()
    enc = encode_code_sets(records)
    policy = hierarchy_policy(enc.codes, "3digit")
    result = disassociate(enc, 3, 2, enc.constraint_ids(policy.constraint_of()),
                          np.random.default_rng(1))
    release = result.release
    hidden = {t for c in release.clusters for t in c.item_chunk}
    hidden |= {t for j in release.joint_clusters for ch in j.shared_chunks for s in ch for t in s}
    exact = [t for t in enc.codes if t not in hidden]
    estimator, truth = ReleaseEstimator(release), BitsetCounter(records)
    assert exact
    assert [estimator.count((t,)) for t in exact] == [truth.count((t,)) for t in exact]


def test_workloads():
    records = [{"a", "b", "c"}] * 5 + [{"a"}] * 5
    w1 = w1_workload(records, 5)
    assert w1[0] == ("a",) and ("a", "b", "c") in w1
    w2 = w2_workload(records, np.random.default_rng(0), n=50)
    assert len(w2) == 50
    assert all(1 <= len(q) <= 3 and any(set(q) <= r for r in records) for q in w2)
    assert w2_workload([set()], np.random.default_rng(0)) == []


def test_gendiag_merges_within_constraints_and_suppresses_the_rest():
    records = [{"a"}, {"a"}, {"b"}, {"b"}, {"c"}, set()]
    gen = gendiag(records, UtilityPolicy("p", (frozenset({"a", "b"}),)), k=3, m=1)
    assert frozenset({"a", "b"}) in gen.items
    assert gen.suppressed == frozenset({"c"})
    assert gen.matches({"a", "b"}) == 4
    # a record holding {a, b} holds "a" with probability 2^(2-1) / (2^2 - 1)
    assert gen.estimate(("a",)) == pytest.approx(4 * 2 / 3)
    assert gen.estimate(("a", "b")) == pytest.approx(4 * 1 / 3)
    assert gen.estimate(("c",)) == 0.0


def test_gendiag_result_is_km_anonymous():
    ds = generate_sample(400, seed=8)
    records = ds.code_sets()
    policy = hierarchy_policy(ds.distinct_codes(), "section")
    gen = gendiag(records, policy, k=4, m=2)
    item_records = [{gen.item_of[c] for c in r if c in gen.item_of} for r in records]
    from collections import Counter
    from itertools import combinations

    counts: Counter = Counter()
    for items in item_records:
        for size in (1, 2):
            counts.update(frozenset(x) for x in combinations(items, size))
    assert min(counts.values()) >= 4
    assert gen.suppressed_count == len(gen.suppressed) > 0


def test_evaluate_release_report():
    ds = generate_sample(300, seed=2)
    records = ds.code_sets()
    enc = encode_code_sets(records)
    policy = hierarchy_policy(enc.codes, "3digit")
    result = disassociate(enc, 4, 2, enc.constraint_ids(policy.constraint_of()),
                          np.random.default_rng(3))
    dataset = Dataset(ds.patients, ds.diagnoses)
    report = evaluate_release(result.release, dataset, policy, np.random.default_rng(4),
                              reconstructions=2)
    m = report.metrics
    assert m["records"] == 300 and m["suppressed codes"] == 0
    for key in ("ARE W1 (reconstructions)", "ARE W1 (estimator)", "ARE W2 (reconstructions)",
                "ARE W2 (estimator)", "MRE within ±2.5% (share)", "MRE within ±5% (share)",
                "CBA ARE W1", "CBA ARE W2", "CBA suppressed codes",
                "MRE median % (one record per item code)",
                "MRE median % (uniform item support)"):
        assert key in m and not math.isnan(m[key]), key
    assert 0 <= m["MRE within ±2.5% (share)"] <= m["MRE within ±5% (share)"] <= 1
    assert report.charts and report.charts[0].png.startswith(b"\x89PNG")
    assert report.tables["comparison with CBA"][0]["disassociation"] == 0
    assert not any(name.startswith("baseline") for name in m)
    rows = report.tables["constraints with the largest MRE"]
    held = Counter(c for r in records for c in {policy.constraint_of()[x] for x in r})
    rare = sum(1 for n in held.values() if n < 4)
    assert rare and len(rows) == m["constraints evaluated"] - rare
    assert any(f"{rare} utility constraints held by fewer than k = 4" in n for n in report.notes)


def test_largest_mre_names_no_constraint_below_k():
    """Named, 296.01's MRE and the release give its true count (2, hidden as 1..k − 1)."""
    from ehr_release import registry
    from ehr_release.release.verification import anonymize_as_released, as_released

    codes = [["401.9", "250.00"] + (["296.01"] if i in (7, 8) else []) for i in range(30)]
    dataset = Dataset.from_records(codes, pd.DataFrame({"age": range(30, 60)}))
    entry = registry.get("disassociation")
    params = entry.parse({"k": "5", "m": "2"})
    files = anonymize_as_released(entry, dataset, params, np.random.default_rng(1), "R1")
    report = entry.evaluate(files, as_released(entry, dataset, "R1"), params,
                            np.random.default_rng(1))
    named = {r["constraint"] for r in report.tables["constraints with the largest MRE"]}
    assert named == {"401.9", "250.00"}
    assert report.metrics["MRE max % (one record per item code)"] > 0  # 296.01 was measured
    assert any("1 utility constraints held by fewer than k = 5" in n for n in report.notes)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sets(st.sampled_from("abcdefgh"), max_size=5), max_size=40))
def test_code_bitsets_mark_exactly_the_records_holding_each_code(code_sets):
    bits = code_bitsets(code_sets)
    assert set(bits) == {c for s in code_sets for c in s}
    for code, mask in bits.items():
        held = [i for i in range(len(code_sets)) if mask >> i & 1]
        assert held == [i for i, s in enumerate(code_sets) if code in s]


def _records_from_bits(bits: dict[str, int], n: int) -> list[set[str]]:
    records: list[set[str]] = [set() for _ in range(n)]
    for code, mask in bits.items():
        for i in range(n):
            if mask >> i & 1:
                records[i].add(code)
    return records


@pytest.mark.parametrize("seed", [1, 2])
def test_sampled_reconstruction_is_consistent_with_the_release(seed):
    """Same check as for ``reconstruct``: every chunk's subrecords, item codes once each."""
    ds = generate_sample(400, seed=9)
    policy = hierarchy_policy(ds.distinct_codes(), "section")
    release = disassociate_dataset(ds, 5, 2, policy, np.random.default_rng(2)).release
    assert release.joint_clusters, "the fixture should exercise shared chunks"
    sampler = ReconstructionSampler.from_release(release)
    records = _records_from_bits(sampler.draw(np.random.default_rng(seed)), ds.n_patients)
    assert_reconstruction_fits(release, records)
    assert Counter(c for r in records for c in r) == \
        Counter(c for r in reconstruct(release, np.random.default_rng(0)) for c in r)


def test_sampled_reconstructions_differ_by_seed():
    ds = generate_sample(200, seed=3)
    release = disassociate_dataset(ds, 5, 2, hierarchy_policy(ds.distinct_codes(), "section"),
                                   np.random.default_rng(2)).release
    sampler = ReconstructionSampler.from_release(release)
    assert sampler.draw(np.random.default_rng(1)) != sampler.draw(np.random.default_rng(2))
    assert sampler.draw(np.random.default_rng(1)) == sampler.draw(np.random.default_rng(1))
