"""The worked example of spec 01 (k = 3, m = 2, maxClusterSize = 6): every expected value."""

from __future__ import annotations

import io
from collections import Counter
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from ehr_release.algorithms.disassociation import disassociate, encode_code_sets
from ehr_release.algorithms.disassociation.verpart import verpart
from ehr_release.configuration.policies import UtilityPolicy
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.disassociation import (
    build_tables,
    caps_general,
    check_km,
    chunk_counts_general,
    parse_release,
)
from tests.disassociation_layout import RELEASE_FILE, read_doc

RECORDS = [
    "296.00 296.01 296.02 834.0 944.01",
    "296.00 296.01 296.02 401.0 944.01 692.71 695.10",
    "296.00 296.02 692.71 834.0 695.10",
    "296.00 296.01 692.71 401.0",
    "296.00 296.01 296.02 692.71 695.10",
    "296.03 295.04 404.00 480.1",
    "294.10 296.03 834.0 944.01",
    "294.10 295.04 296.03 480.1",
    "294.10 295.04 404.00",
    "294.10 295.04 296.03 834.0 944.01",
]
POLICY = UtilityPolicy("example", (
    frozenset({"294.10", "295.04", "296.00", "296.01", "296.02", "296.03"}),
    frozenset({"692.71", "695.10"}), frozenset({"401.0", "404.00"}), frozenset({"480.1"}),
    frozenset({"834.0", "944.01"}),
))


def _sets(chunk):
    return Counter(frozenset(s) for s in chunk)


@pytest.fixture(scope="module")
def example():
    records = [r.split() for r in RECORDS]
    enc = encode_code_sets(records)
    constraint_of = enc.constraint_ids(POLICY.constraint_of())
    result = disassociate(enc, 3, 2, constraint_of, np.random.default_rng(7),
                          max_cluster_size=6)
    return records, enc, constraint_of, result


def test_horpart_splits_on_296_00(example):
    _, _, _, result = example
    assert [c.tolist() for c in result.clusters] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


def test_p1_supports_and_item_codes(example):
    records, enc, _, _ = example
    support = Counter(code for r in records[:5] for code in r)
    assert {c: support[c] for c in ["296.00", "296.01", "296.02", "692.71", "695.10",
                                    "401.0", "834.0", "944.01"]} == {
        "296.00": 5, "296.01": 4, "296.02": 4, "692.71": 4, "695.10": 3,
        "401.0": 2, "834.0": 2, "944.01": 2}
    _, items = verpart([tuple(enc.code_ids(r)) for r in records[:5]], 3, 2,
                       enc.constraint_ids(POLICY.constraint_of()))
    assert {enc.codes[t] for t in items} == {"401.0", "834.0", "944.01"}


def test_p1_vertical_partitioning_trace(example):
    records, enc, constraint_of, _ = example
    trace: list[tuple[int, str, int]] = []
    domains, _ = verpart([tuple(enc.code_ids(r)) for r in records[:5]], 3, 2, constraint_of,
                         trace=trace)
    named = [(p, e, enc.codes[t]) for p, e, t in trace]
    assert named[:7] == [(1, "add", "296.00"), (1, "add", "296.01"), (1, "add", "296.02"),
                         (1, "add", "692.71"), (1, "reject", "695.10"),
                         (1, "give back", "692.71"), (2, "add", "692.71")]
    assert [[enc.codes[t] for t in d] for d in domains] == [
        ["296.00", "296.01", "296.02"], ["692.71", "695.10"]]


def test_p1_and_p2_chunks(example):
    _, _, _, result = example
    p1, p2 = result.release.clusters
    assert _sets(p1.record_chunks[0]) == _sets([
        {"296.00", "296.01", "296.02"}, {"296.00", "296.01", "296.02"}, {"296.00", "296.02"},
        {"296.00", "296.01"}, {"296.00", "296.01", "296.02"}])
    assert _sets(p1.record_chunks[1]) == _sets([
        set(), {"692.71", "695.10"}, {"692.71", "695.10"}, {"692.71"}, {"692.71", "695.10"}])
    assert len(p2.record_chunks) == 1
    assert {c for s in p2.record_chunks[0] for c in s} == {"294.10", "295.04", "296.03"}


def test_p2_item_chunk_before_refining(example):
    records, enc, constraint_of, _ = example
    _, items = verpart([tuple(enc.code_ids(r)) for r in records[5:]], 3, 2, constraint_of)
    assert {enc.codes[t] for t in items} == {"404.00", "480.1", "834.0", "944.01"}


def test_refine_builds_the_joint_cluster(example):
    _, _, _, result = example
    p1, p2 = result.release.clusters
    assert p1.item_chunk == ("401.0",)
    assert p2.item_chunk == ("404.00", "480.1")
    (joint,) = result.release.joint_clusters
    assert joint.clusters == ("P1", "P2")
    (shared,) = joint.shared_chunks
    assert len(shared) == 10
    counts = Counter(c for s in shared for c in s)
    assert counts == {"834.0": 4, "944.01": 4}
    assert sum(1 for s in shared if set(s) == {"834.0", "944.01"}) == 3


def test_release_has_the_issue_format(example):
    """Issue 18's layout, loaded with the one pandas call the datasheet documents."""
    _, _, _, result = example
    frame = pd.read_parquet(io.BytesIO(result.release.to_bytes()))
    assert list(frame.columns) == ["k", "m", "group", "size", "joint", "chunk", "subrecord",
                                   "code"]
    assert set(zip(frame["k"], frame["m"], strict=True)) == {(3, 2)}
    assert list(dict.fromkeys(frame["group"])) == ["P1", "P2", "J1"]
    record = frame[frame["chunk"] > 0]
    listed = record.groupby(["group", "chunk"])["subrecord"].nunique()
    size = record.groupby(["group", "chunk"])["size"].first()
    assert (listed == size).all()               # every chunk lists one subrecord per record
    p1 = frame[(frame["group"] == "P1") & (frame["chunk"] == 2)]
    assert p1["code"].isna().any()              # an empty subrecord is one null row
    assert set(frame.loc[frame["group"] != "J1", "joint"]) == {"J1"}
    doc = read_doc(result.release.to_bytes())
    assert [] in doc["clusters"][0]["record_chunks"][1]
    assert doc["joint_clusters"][0]["clusters"] == ["P1", "P2"]


def test_unique_pair_can_be_matched_by_four_records(example):
    records, _, _, result = example
    assert sum(1 for r in records if {"296.01", "834.0"} <= set(r)) == 1
    rel = parse_release({RELEASE_FILE: result.release.to_bytes()})
    tables = build_tables(rel, Dataset.from_records(records))
    index = {c: i for i, c in enumerate(tables.codes)}
    s = tuple(sorted((index["296.01"], index["834.0"])))
    assert caps_general(tables, chunk_counts_general(tables, 2), [s]) == {s: 4}


def test_33_itemsets_below_k_in_the_original(example):
    records, _, _, _ = example
    counts: Counter[tuple[str, ...]] = Counter()
    for r in records:
        for size in (1, 2):
            counts.update(combinations(sorted(r), size))
    assert sum(1 for n in counts.values() if n < 3) == 33


@pytest.mark.parametrize("general", [False, True])
def test_verifier_accepts_the_example(example, general):
    records, _, _, result = example
    report = check_km({RELEASE_FILE: result.release.to_bytes()},
                            Dataset.from_records(records), 3, 2, general=general)
    assert report.holds, report.to_dict()
    g1 = next(r for r in report.requirements if r.name == "Guarantee 1")
    assert g1.evidence["support"] == 3
