"""Disassociation's invariants on random data, its parameter checks and reconstruction.

These tests read the algorithm's private bookkeeping (which record went to which cluster)
to check properties the verifier can only bound from the published bytes.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.disassociation import (
    DisassociatedRelease,
    disassociate,
    disassociate_dataset,
    encode_code_sets,
    encode_dataset,
    reconstruct,
    reconstruct_dataset,
)
from ehr_release.algorithms.disassociation import horpart as horpart_module
from ehr_release.algorithms.disassociation.verpart import single_chunk_clusters, verpart
from ehr_release.configuration.policies import UtilityPolicy, hierarchy_policy
from ehr_release.core.errors import InputError, ParameterError
from ehr_release.ingest import read_dataset
from ehr_release.samples.sample import generate_sample, write_sample

CODES = [f"{c:03d}.{d}" for c in range(100, 104) for d in range(4)]
FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def cases(draw):
    n = draw(st.integers(4, 45))
    # One strategy for every record: making one per record cost more than the test.
    record = st.lists(st.sampled_from(CODES), max_size=6)
    records = [sorted(set(draw(record))) for _ in range(n)]
    k = draw(st.integers(2, min(5, n)))
    m = draw(st.integers(1, 3))
    groups = draw(st.lists(st.integers(-1, 3), min_size=len(CODES), max_size=len(CODES)))
    return records, groups, k, m, draw(st.integers(0, 1000))


def _run(records, groups, k, m, seed, **options):
    enc = encode_code_sets(records)
    constraint_of = np.array([groups[CODES.index(c)] for c in enc.codes], dtype=np.int64)
    return enc, disassociate(enc, k, m, constraint_of, np.random.default_rng(seed), **options)


def _anonymous(subrecords, k: int, m: int) -> bool:
    counts: Counter[tuple[str, ...]] = Counter()
    for s in subrecords:
        for size in range(1, min(m, len(s)) + 1):
            counts.update(combinations(sorted(s), size))
    return all(n >= k for n in counts.values())


@FAST
@given(cases())
def test_invariants_on_random_data(case):
    records, groups, k, m, seed = case
    enc, result = _run(records, groups, k, m, seed)
    release = result.release
    members = np.concatenate(result.clusters)
    assert sorted(members.tolist()) == list(range(len(records)))   # a partition
    assert all(len(c) >= k for c in result.clusters)
    by_id = {}
    for idx, cluster in zip(result.clusters, release.clusters, strict=True):
        by_id[cluster.id] = idx
        assert cluster.size == len(idx)
        rows = [set(records[i]) for i in idx]
        domains = [{t for s in ch for t in s} for ch in cluster.record_chunks]
        for chunk, domain in zip(cluster.record_chunks, domains, strict=True):
            assert len(chunk) == cluster.size
            # lossless: the chunk is the multiset of the records' projections
            assert Counter(frozenset(s) for s in chunk) == \
                Counter(frozenset(r & domain) for r in rows)
            assert _anonymous(chunk, k, m)
        support = Counter(t for r in rows for t in r)
        assert all(support[t] < k for t in cluster.item_chunk)
        placed = [*domains, set(cluster.item_chunk)]
        assert sum(len(d) for d in placed) == len(set().union(*placed))  # disjoint
    shared_seen = set()
    for joint in release.joint_clusters:
        assert len(joint.clusters) >= 2 and not shared_seen & set(joint.clusters)
        shared_seen |= set(joint.clusters)
        idx = np.concatenate([by_id[c] for c in joint.clusters])
        rows = [set(records[i]) for i in idx]
        for chunk in joint.shared_chunks:
            domain = {t for s in chunk for t in s}
            assert Counter(frozenset(s) for s in chunk) == \
                Counter(frozenset(r & domain) for r in rows)
            assert _anonymous(chunk, k, m)
    # every code of every record is published somewhere in its cluster or joint cluster
    for cluster, idx in zip(release.clusters, result.clusters, strict=True):
        joint = next((j for j in release.joint_clusters if cluster.id in j.clusters), None)
        place = {t for ch in cluster.record_chunks for s in ch for t in s}
        place |= set(cluster.item_chunk)
        if joint:
            place |= {t for ch in joint.shared_chunks for s in ch for t in s}
        assert all(set(records[i]) <= place for i in idx)


@FAST
@given(cases())
def test_peeling_and_batched_horpart_agree(case):
    records, groups, k, _, _ = case
    enc = encode_code_sets(records)
    constraint_of = np.array([groups[CODES.index(c)] for c in enc.codes], dtype=np.int64)
    batched = horpart_module.horpart(enc, k, constraint_of, 2 * k)
    original = horpart_module.PEEL_MIN_SIZE
    try:
        horpart_module.PEEL_MIN_SIZE = 2 * k
        peeled = horpart_module.horpart(enc, k, constraint_of, 2 * k)
    finally:
        horpart_module.PEEL_MIN_SIZE = original
    assert [c.tolist() for c in peeled] == [c.tolist() for c in batched]


@FAST
@given(cases())
def test_single_chunk_fast_path_matches_verpart(case):
    records, groups, k, m, _ = case
    enc = encode_code_sets(records)
    constraint_of = [groups[CODES.index(c)] for c in enc.codes]
    clusters = horpart_module.horpart(enc, k, np.array(constraint_of, dtype=np.int64), 2 * k)
    single, frequent, items = single_chunk_clusters(enc.indptr, enc.indices, clusters, k, m)
    for p, idx in enumerate(clusters):
        domains, expected_items = verpart([enc.rows[i] for i in idx], k, m, constraint_of)
        assert items[p] == expected_items
        assert sorted(t for d in domains for t in d) == frequent[p]
        if single[p]:
            assert len(domains) == (1 if frequent[p] else 0)


def test_release_draws_nothing_and_orders_chunks_by_the_documented_rule():
    """Issue 32: the subrecord order is the format's documented rule, not a draw — the same
    bytes whatever the generator, every chunk in its rule's order, and no chunk left in the
    order the records came in (slot order would link a record's pieces across chunks)."""
    from ehr_release.algorithms.disassociation.order import ordered_chunk

    ds = generate_sample(300, seed=4)
    policy = hierarchy_policy(ds.distinct_codes(), "3digit")
    one = disassociate_dataset(ds, 4, 2, policy, np.random.default_rng(11))
    two = disassociate_dataset(ds, 4, 2, policy, np.random.default_rng(12))
    assert one.release.to_bytes() == two.release.to_bytes()
    moved, sets = 0, ds.code_sets()
    for cluster, idx in zip(one.release.clusters, one.clusters, strict=True):
        for j, chunk in enumerate(cluster.record_chunks, start=1):
            assert chunk == ordered_chunk(cluster.id, j, chunk[::-1])
            domain = {t for s in chunk for t in s}
            in_slot_order = [tuple(sorted(sets[i] & domain))
                             for i in idx.tolist()]
            moved += chunk != in_slot_order
    assert moved > 0


def test_policy_keeps_constraint_codes_together():
    """Two codes always seen together stay in one chunk when they form a constraint."""
    records = [["100.0", "100.1", "101.0"]] * 6 + [["100.0", "100.1"]] * 2
    enc = encode_code_sets(records)
    policy = UtilityPolicy("p", (frozenset({"100.0", "100.1"}),))
    result = disassociate(enc, 3, 2, enc.constraint_ids(policy.constraint_of()),
                          np.random.default_rng(0))
    for cluster in result.release.clusters:
        domains = [{t for s in ch for t in s} for ch in cluster.record_chunks]
        assert any({"100.0", "100.1"} <= d for d in domains)


@pytest.mark.parametrize("k, m, message", [
    (1, 2, "'k' must be an integer ≥ 2"),
    (2, 0, "'m' must be an integer ≥ 1"),
    (11, 2, "must not exceed the number of records"),
    (True, 2, "'k' must be an integer ≥ 2"),
])
def test_bad_parameters_are_refused(k, m, message):
    enc = encode_code_sets([["100.0"]] * 10)
    with pytest.raises(ParameterError, match=message):
        disassociate(enc, k, m, np.full(enc.n_codes, -1), np.random.default_rng(0))


def test_max_cluster_size_below_k_is_refused():
    enc = encode_code_sets([["100.0"]] * 10)
    with pytest.raises(ParameterError, match="max_cluster_size"):
        disassociate(enc, 3, 2, np.full(enc.n_codes, -1), np.random.default_rng(0),
                     max_cluster_size=2)


def test_empty_records_and_identical_records_form_clusters():
    records = [[] for _ in range(7)] + [["100.0"]] * 25
    enc, result = _run(records, [-1] * len(CODES), 3, 2, 0)
    assert sum(c.size for c in result.release.clusters) == 32
    assert all(c.size >= 3 for c in result.release.clusters)


def test_encode_dataset_rejects_unknown_patients():
    ds = generate_sample(10, seed=1)
    broken = ds.diagnoses.copy()
    broken.loc[0, "patient_id"] = "NOBODY"
    from ehr_release.model.dataset import Dataset

    with pytest.raises(InputError, match="not in the patients table"):
        encode_dataset(Dataset(ds.patients, broken))


# --------------------------------------------------------------------------- reconstruction
@pytest.fixture(scope="module")
def released():
    ds = generate_sample(400, seed=9)
    policy = hierarchy_policy(ds.distinct_codes(), "section")
    result = disassociate_dataset(ds, 5, 2, policy, np.random.default_rng(2))
    return ds, result


def _assert_chunk_fits(rows: list[set[str]], chunk: list[tuple[str, ...]]) -> None:
    domain = {t for s in chunk for t in s}
    assert Counter(frozenset(r & domain) for r in rows) == Counter(frozenset(s) for s in chunk)


def assert_reconstruction_fits(release: DisassociatedRelease, records: list[set[str]]) -> None:
    """Records (release order) hold each record and shared chunk's subrecords, one each,
    and each item-chunk code in exactly one record of its cluster."""
    first, start = {}, 0
    for cluster in release.clusters:
        rows = records[start:start + cluster.size]
        first[cluster.id] = start
        start += cluster.size
        for chunk in cluster.record_chunks:
            _assert_chunk_fits(rows, chunk)
        for code in cluster.item_chunk:
            assert sum(code in r for r in rows) == 1
    size = {c.id: c.size for c in release.clusters}
    for joint in release.joint_clusters:
        rows = [records[first[c] + i] for c in joint.clusters for i in range(size[c])]
        for chunk in joint.shared_chunks:
            _assert_chunk_fits(rows, chunk)


def test_reconstruction_is_consistent_with_the_release(released):
    ds, result = released
    release = DisassociatedRelease.from_bytes(result.release.to_bytes())
    records = reconstruct(release, np.random.default_rng(5))
    assert len(records) == ds.n_patients
    assert_reconstruction_fits(release, records)
    counts = Counter(c for r in records for c in r)
    original = Counter(c for r in ds.code_sets() for c in r)
    assert set(counts) == set(original)


def test_reconstructions_differ_by_seed_and_item_support_option(released):
    _, result = released
    a = reconstruct(result.release, np.random.default_rng(1))
    b = reconstruct(result.release, np.random.default_rng(2))
    assert a != b
    uniform = reconstruct(result.release, np.random.default_rng(1), item_support="uniform")
    assert sum(len(r) for r in uniform) >= sum(len(r) for r in a)
    with pytest.raises(ParameterError, match="item_support"):
        reconstruct(result.release, np.random.default_rng(1), item_support="all")


def test_reconstruction_loads_as_an_ordinary_table(released, tmp_path):
    _, result = released
    table = reconstruct_dataset(result.release, np.random.default_rng(3))
    path = write_sample(table, tmp_path / "reconstructed.csv")
    back = read_dataset(path)
    assert back.n_patients == table.n_patients
    assert sorted(back.diagnoses["code"]) == sorted(table.diagnoses["code"])


def test_from_bytes_rejects_other_files():
    with pytest.raises(InputError, match="not a disassociation release"):
        DisassociatedRelease.from_bytes(b'{"algorithm": "other"}')
