"""New disassociation measures: risk by known codes, both reconstructions, W2 by size,
and the ``max_cluster_size`` parameter."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from ehr_release import registry
from ehr_release.algorithms.disassociation import (
    RELEASE_FILE,
    disassociate,
    disassociate_dataset,
    encode_code_sets,
)
from ehr_release.configuration.policies import hierarchy_policy
from ehr_release.core.errors import ParameterError
from ehr_release.model.dataset import Dataset
from ehr_release.samples.sample import generate_sample
from ehr_release.utility.disassociation import are, evaluate_release, w2_workload
from ehr_release.utility.reconstruction_sampler import ReconstructionSampler
from ehr_release.utility.reidentification import (
    CandidateCounter,
    _subsets,
    code_sets_to_test,
    risk_table,
)
from tests.test_disassociation_example import POLICY, RECORDS


@pytest.fixture(scope="module")
def example_release():
    records = [r.split() for r in RECORDS]
    enc = encode_code_sets(records)
    result = disassociate(enc, 3, 2, enc.constraint_ids(POLICY.constraint_of()),
                          np.random.default_rng(0), max_cluster_size=6)
    return [set(r) for r in records], result.release


def test_candidates_of_the_papers_unique_pair(example_release):
    """Spec 01 worked example: {296.01, 834.0} is unique in D, and in the output it can be
    matched by up to 4 records of a reconstruction (Fig. 5 shows 3 of them)."""
    records, release = example_release
    assert sum({"296.01", "834.0"} <= r for r in records) == 1
    counter = CandidateCounter(release)
    assert counter.count({"296.01", "834.0"}) == 4
    assert counter.count({"296.00"}) == 5            # one record chunk of P1
    assert counter.count({"401.0"}) == 5             # item chunk: any record of P1
    assert counter.count({"296.00", "294.10"}) == 0  # never in one cluster


@pytest.mark.parametrize("key_block", [None, 7])  # 7: one record's keys per block
def test_sampled_positions_are_uniform_distinct_and_within_each_record(key_block,
                                                                        monkeypatch):
    """The risk table draws a code set of each sampled record: ``size`` distinct positions
    below its length, every such subset equally likely (6 pairs of 4 positions, 3 of 3)."""
    from ehr_release.utility import reidentification

    if key_block is not None:
        monkeypatch.setattr(reidentification, "KEY_BLOCK", key_block)
    rng = np.random.default_rng(7)
    lengths = np.array([4, 3] * 6000)
    drawn = _subsets(lengths, 2, rng)
    for n in (4, 3):
        picks = [tuple(p) for p, length in zip(drawn, lengths, strict=True) if length == n]
        assert all(a < b < n for a, b in picks)
        counts = np.array([picks.count(pair) for pair in combinations(range(n), 2)])
        expected = len(picks) / len(counts)
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert chi2 < 20.5, (n, counts)  # p ≈ 0.001 at 5 degrees of freedom


def test_sampled_code_sets_are_held_by_some_record():
    records = [frozenset(f"c{i}" for i in range(j % 9 + 1)) for j in range(400)]
    for size, (sets, sampled) in code_sets_to_test(records, np.random.default_rng(3),
                                                   max_sets=50).items():
        assert sampled == (sum(len(list(combinations(r, size))) for r in records) > 50)
        assert sets and all(len(s) == size and any(set(s) <= r for r in records)
                            for s in sets)


def test_risk_table_on_the_worked_example(example_release):
    """Spec 01: 33 itemsets of size ≤ 2 have support < 3 in D; the release (k = 3, m = 2)
    leaves none of them with fewer than 3 candidates (Guarantee 1)."""
    records, release = example_release
    rows = {r["known codes"]: r for r in risk_table(records, release,
                                                    np.random.default_rng(0))}
    below = sum(round(rows[s]["< k (original)"] * rows[s]["code sets"]) for s in (1, 2))
    assert below == 33
    assert rows[1]["< k (release)"] == rows[2]["< k (release)"] == 0.0
    assert rows[2]["unique (original)"] > 0 and rows[2]["covered by the guarantee"]
    assert not rows[3]["covered by the guarantee"]


def test_candidates_never_below_true_support():
    """The original data is one reconstruction, so it can never hold a set more often than
    the largest reconstruction count."""
    ds = generate_sample(300, seed=4)
    records = ds.code_sets()
    release = disassociate_dataset(ds, 4, 2, hierarchy_policy(ds.distinct_codes(), "section"),
                                   np.random.default_rng(1)).release
    counter = CandidateCounter(release)
    rng = np.random.default_rng(2)
    for i in rng.choice(len(records), 60, replace=False).tolist():
        codes = sorted(records[i])
        for size in (1, 2, 3):
            for s in list(combinations(codes, size))[:5]:
                assert counter.count(s) >= sum(set(s) <= r for r in records)
                if size <= 2:
                    assert counter.count(s) >= 4


def test_uniform_item_support_draws():
    """Each item-chunk code goes to 1..min(k − 1, |P|) distinct records of its cluster."""
    ds = generate_sample(300, seed=7)
    release = disassociate_dataset(ds, 5, 2, hierarchy_policy(ds.distinct_codes(), "3digit"),
                                   np.random.default_rng(3)).release
    sampler = ReconstructionSampler.from_release(release)
    bounds, start = {}, 0
    for c in release.clusters:
        for code in c.item_chunk:
            bounds.setdefault(code, []).append((start, c.size))
        start += c.size
    chunked = {code for c in release.clusters for ch in c.record_chunks for s in ch
               for code in s}
    chunked |= {code for j in release.joint_clusters for ch in j.shared_chunks for s in ch
                for code in s}
    only_items = [code for code, where in bounds.items()
                  if len(where) == 1 and code not in chunked]
    assert only_items
    counts = []
    for seed in range(3):
        bits = sampler.draw(np.random.default_rng(seed), "uniform", release.k)
        for code in only_items:
            (first, size), = bounds[code]
            held = [i for i in range(release_size(release)) if bits[code] >> i & 1]
            assert held and all(first <= i < first + size for i in held)
            assert len(held) <= min(release.k - 1, size)
            counts.append(len(held))
    assert max(counts) > 1
    with pytest.raises(ValueError):
        sampler.draw(np.random.default_rng(0), "many")


def release_size(release):
    return sum(c.size for c in release.clusters)


def test_report_has_both_mre_variants_w2_by_size_and_risk():
    ds = generate_sample(300, seed=2)
    policy = hierarchy_policy(ds.distinct_codes(), "3digit")
    release = disassociate_dataset(ds, 4, 2, policy, np.random.default_rng(3)).release
    report = evaluate_release(release, Dataset(ds.patients, ds.diagnoses), policy,
                              np.random.default_rng(4), reconstructions=2)
    m = report.metrics
    for label in ("one record per item code", "uniform item support"):
        assert m[f"MRE min % ({label})"] <= m[f"MRE median % ({label})"] <= \
            m[f"MRE max % ({label})"]
        assert 0 <= m[f"MRE within ±2.5% (share, {label})"] <= \
            m[f"MRE within ±5% (share, {label})"] <= 1
    assert m["MRE within ±5% (share)"] == m["MRE within ±5% (share, one record per item code)"]
    rows = report.tables["ARE W2 by query size"]
    assert sum(r["queries"] for r in rows) == 1000
    assert [r["codes per query"] for r in rows] == sorted(r["codes per query"] for r in rows)
    # per-size ARE, weighted by queries, gives back the overall estimator ARE
    weighted = sum(r["ARE (estimator)"] * r["queries"] for r in rows) / 1000
    assert weighted == pytest.approx(m["ARE W2 (estimator)"], abs=1e-3)
    assert all("CBA ARE" in r for r in rows)
    risk = report.tables["re-identification risk by known codes"]
    assert [r["known codes"] for r in risk] == [1, 2, 3, 4, 5]
    assert m["share of 2-code sets with < k candidates (release)"] == 0.0
    gd = evaluate_release(release, Dataset(ds.patients, ds.diagnoses), policy,
                          np.random.default_rng(4), reconstructions=1, comparator="gendiag",
                          risk=False)
    assert "GenDiag ARE W1" in gd.metrics and "comparison with GenDiag" in gd.tables
    assert "re-identification risk by known codes" not in gd.tables


def _w2_per_query_scan(code_sets, rng, n, sizes=(1, 4)):
    """W2 as first written: the eligible records found again for every query."""
    records = [sorted(s) for s in code_sets if s]
    lengths = np.array([len(r) for r in records])
    out = []
    for _ in range(n):
        size = int(rng.integers(sizes[0], sizes[1] + 1))
        eligible = np.flatnonzero(lengths >= size)
        if not len(eligible):
            size = int(lengths.max())
            eligible = np.flatnonzero(lengths >= size)
        rec = records[int(eligible[rng.integers(len(eligible))])]
        picked = rng.choice(len(rec), size=size, replace=False)
        out.append(tuple(sorted(rec[i] for i in picked)))
    return out


@pytest.mark.parametrize("longest", [2, 3, 6])
def test_w2_workload_draws_what_a_scan_per_query_draws(longest):
    """Finding each size's eligible records once keeps the queries and the rng's state,
    also when the drawn size exceeds every record (clamped to the longest)."""
    rng = np.random.default_rng(longest)
    codes = [f"C{i}" for i in range(12)]
    code_sets = [frozenset(rng.choice(codes, size=int(rng.integers(0, longest + 1)),
                                      replace=False).tolist()) for _ in range(60)]
    code_sets.append(frozenset(codes[:longest]))
    fast, slow = np.random.default_rng(7), np.random.default_rng(7)
    assert w2_workload(code_sets, fast, n=300) == _w2_per_query_scan(code_sets, slow, 300)
    assert fast.integers(1 << 62) == slow.integers(1 << 62)


def test_are_helper_matches_the_table_definition():
    assert are([2, 4], [1, 4]) == pytest.approx(0.25)


# ------------------------------------------------------------------ max_cluster_size
@pytest.fixture(scope="module")
def entry():
    return registry.get("disassociation")


def test_max_cluster_size_default_keeps_releases_byte_identical(entry):
    """Unset, the parameter is 2k (the paper's choice), so releases do not change."""
    ds = generate_sample(200, seed=6)
    params = entry.parse({"k": "4"})
    assert params["max_cluster_size"] is None
    default = entry.anonymize(ds, params, np.random.default_rng(5))[RELEASE_FILE]
    explicit = entry.anonymize(ds, entry.parse({"k": "4", "max_cluster_size": "8"}),
                               np.random.default_rng(5))[RELEASE_FILE]
    policy = hierarchy_policy(ds.distinct_codes(), "3digit")
    direct = disassociate_dataset(ds, 4, 2, policy, np.random.default_rng(5)).release
    assert default == explicit == direct.to_bytes()


def test_max_cluster_size_changes_the_clusters(entry):
    ds = generate_sample(200, seed=6)
    small = entry.anonymize(ds, entry.parse({"k": "4", "max_cluster_size": "4"}),
                            np.random.default_rng(5))[RELEASE_FILE]
    large = entry.anonymize(ds, entry.parse({"k": "4", "max_cluster_size": "40"}),
                            np.random.default_rng(5))[RELEASE_FILE]
    from ehr_release.algorithms.disassociation import DisassociatedRelease

    n_small = len(DisassociatedRelease.from_bytes(small).clusters)
    n_large = len(DisassociatedRelease.from_bytes(large).clusters)
    assert n_small > n_large


def test_max_cluster_size_below_k_is_refused(entry):
    ds = generate_sample(50, seed=1)
    with pytest.raises(ParameterError, match="max_cluster_size"):
        entry.anonymize(ds, entry.parse({"k": "4", "max_cluster_size": "3"}),
                        np.random.default_rng(0))
    with pytest.raises(ParameterError, match="max_cluster_size"):
        entry.parse({"k": "4", "max_cluster_size": "1"})


def test_what_is_derived_ahead_is_taken_once_and_changes_nothing(monkeypatch):
    """The flow's second process runs the comparator and the release-independent part of
    the evaluation (workloads, true answers, seeds, the risk table's code sets) before the
    release exists (``prepare_evaluation``); the evaluation of that very data set, those
    parameters and a random stream in the same state takes them instead of deriving them
    again, and its report is the one computed in full."""
    from ehr_release.utility import disassociation as utility

    ds = generate_sample(200, seed=5)
    params = {"k": 4, "m": 2, "policy": "hierarchy:3digit"}
    policy = hierarchy_policy(ds.distinct_codes(), "3digit")
    release = disassociate_dataset(ds, 4, 2, policy, np.random.default_rng(3)).release
    files = {RELEASE_FILE: release.to_bytes()}
    full = utility.evaluate(files, ds, params, np.random.default_rng(9))
    label, _ = utility.COMPARATORS["cba"]
    derive_side = utility.original_side

    def not_again(*args, **kwargs):
        raise AssertionError("derived again")

    # Derived for other parameters, or for an equal data set held as another object: both
    # are derived again; from a stream in another state: the original side is.
    for data, given, seed, what in (
            (ds, {**params, "k": 3}, 9, "cba"), (Dataset(ds.patients, ds.diagnoses), params, 9,
                                                 "cba"),
            (ds, {**params, "k": 3}, 9, "side"), (ds, params, 8, "side")):
        utility.prepare_evaluation(data, given, np.random.default_rng(seed))
        with monkeypatch.context() as patched:
            if what == "cba":
                patched.setitem(utility.COMPARATORS, "cba", (label, not_again))
            else:
                patched.setattr(utility, "original_side", not_again)
            with pytest.raises(AssertionError, match="derived again"):
                utility.evaluate(files, ds, params, np.random.default_rng(9))

    utility.prepare_evaluation(ds, params, np.random.default_rng(9))
    with monkeypatch.context() as patched:
        patched.setitem(utility.COMPARATORS, "cba", (label, not_again))
        patched.setattr(utility, "original_side", not_again)
        ahead = utility.evaluate(files, ds, params, np.random.default_rng(9))
        # repr: a table may hold NaN (a size whose queries CBA all suppressed), never equal
        # itself
        assert repr((ahead.metrics, ahead.tables, ahead.notes)) == \
            repr((full.metrics, full.tables, full.notes))
        assert ahead.charts[0].png == full.charts[0].png
        with pytest.raises(AssertionError, match="derived again"):  # taken once only
            utility.evaluate(files, ds, params, np.random.default_rng(9))
    assert utility.original_side is derive_side
