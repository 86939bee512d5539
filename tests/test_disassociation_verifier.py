"""The independent verifier: accepts what the algorithm produces, rejects broken releases.

The oracle for the chunk check is recomputed here by brute force from the release's nested
form (``tests/disassociation_layout.py``), and the fast
(m ≤ 2) path of the verifier is cross-checked against its direct enumeration.
"""

from __future__ import annotations

import copy
from collections import Counter
from itertools import combinations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.disassociation import disassociate, encode_code_sets
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.disassociation import (
    analyse,
    build_tables,
    caps_general,
    caps_small,
    check_km,
    chunk_counts_general,
    chunk_counts_small,
    original_counts_general,
    original_counts_small,
    parse_release,
)
from ehr_release.utility.reidentification import CandidateCounter
from tests.disassociation_layout import (
    RELEASE_FILE,
    doc_rows,
    files_of,
    read_doc,
    table_of,
    write_table,
)

CODES = [f"{c:03d}.{d}" for c in range(100, 104) for d in range(4)]
FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


@st.composite
def cases(draw, min_records: int = 6):
    """A random dataset, a random disjoint policy, k, m and a seed."""
    n = draw(st.integers(min_records, 40))
    vocab = draw(st.integers(3, len(CODES)))
    # One strategy for every record: making one per record cost more than the test.
    record = st.lists(st.sampled_from(CODES[:vocab]), max_size=6)
    records = [sorted(set(draw(record))) for _ in range(n)]
    k = draw(st.integers(2, min(4, n)))
    m = draw(st.integers(1, 3))
    groups = draw(st.lists(st.integers(-1, 3), min_size=len(CODES), max_size=len(CODES)))
    seed = draw(st.integers(0, 2**16))
    return records, groups, k, m, seed


def _run(records, groups, k, m, seed, **options):
    enc = encode_code_sets(records)
    constraint_of = np.array([groups[CODES.index(c)] for c in enc.codes], dtype=np.int64)
    result = disassociate(enc, k, m, constraint_of, np.random.default_rng(seed), **options)
    return result, Dataset.from_records(records)


def _files(doc) -> dict[str, bytes]:
    return files_of(doc)


def _requirement(report, name):
    return next(r for r in report.requirements if r.name == name)


def _min_chunk_count(doc, m: int) -> int | None:
    """Brute force: smallest count of an itemset (≤ m codes) inside any chunk."""
    chunks = [ch for c in doc["clusters"] for ch in c["record_chunks"]]
    chunks += [ch for j in doc["joint_clusters"] for ch in j["shared_chunks"]]
    smallest = None
    for chunk in chunks:
        counts: Counter[tuple[str, ...]] = Counter()
        for sub in chunk:
            for size in range(1, min(m, len(sub)) + 1):
                counts.update(combinations(sorted(sub), size))
        if counts:
            low = min(counts.values())
            smallest = low if smallest is None else min(smallest, low)
    return smallest


# --------------------------------------------------------------------------- acceptance
@FAST
@given(cases())
def test_verifier_accepts_the_algorithms_output(case):
    records, groups, k, m, seed = case
    result, dataset = _run(records, groups, k, m, seed)
    report = check_km({RELEASE_FILE: result.release.to_bytes()}, dataset, k, m)
    assert report.holds, report.to_dict()


@FAST
@given(cases())
def test_fast_path_matches_direct_enumeration(case):
    records, groups, k, _, seed = case
    result, dataset = _run(records, groups, k, 2, seed, max_joint_size=8 * k)
    rel = parse_release({RELEASE_FILE: result.release.to_bytes()})
    fast, slow = (analyse(rel, dataset, 2, general=g) for g in (False, True))
    assert fast.weakest_cap == slow.weakest_cap
    assert fast.weakest_chunk_support == slow.weakest_chunk_support
    assert fast.itemsets_checked == slow.itemsets_checked
    assert fast.untruthful == slow.untruthful == []
    t = build_tables(rel, dataset)
    c = len(t.codes)
    _, _, k2, n2 = chunk_counts_small(t)
    single, q2, _ = original_counts_small(t)
    cap1, cap2 = caps_small(t, k2, n2, q2)
    exact = caps_general(t, chunk_counts_general(t, 2),
                         [(int(x),) for x in np.flatnonzero(single)]
                         + [(int(q // c), int(q % c)) for q in q2])
    assert [exact[(int(x),)] for x in np.flatnonzero(single)] == \
        cap1[np.flatnonzero(single)].astype(int).tolist()
    assert [exact[(int(q // c), int(q % c))] for q in q2] == cap2.astype(int).tolist()


@FAST
@given(cases())
def test_general_caps_equal_the_utility_modules_candidate_count(case):
    """cap(S) for every original itemset of up to m (≤ 3) codes, against the risk table's
    own count of the same definition (``utility.reidentification``, written apart): the
    fast path covers only m ≤ 2, so this holds the general path at m = 3."""
    records, groups, k, m, seed = case
    result, dataset = _run(records, groups, k, m, seed, max_joint_size=8 * k)
    t = build_tables(parse_release({RELEASE_FILE: result.release.to_bytes()}), dataset)
    itemsets = sorted(original_counts_general(t, m))
    caps = caps_general(t, chunk_counts_general(t, m), itemsets)
    count = CandidateCounter(result.release).count
    assert caps == {s: count([str(t.codes[c]) for c in s]) for s in itemsets}


# --------------------------------------------------------------------------- broken on purpose
@FAST
@given(cases(min_records=10))
def test_rejects_a_subrecord_moved_between_chunks(case):
    records, groups, k, m, seed = case
    result, dataset = _run(records, groups, k, m, seed)
    doc = read_doc(result.release.to_bytes())
    movable = [c for c in doc["clusters"] if len(c["record_chunks"]) >= 2]
    assume(movable)
    src, dst = movable[0]["record_chunks"][:2]
    dst.append(src.pop(next(i for i, s in enumerate(src) if s)))
    report = check_km(_files(doc), dataset, k, m)
    assert not report.holds
    assert not _requirement(report, "structure").passed


@FAST
@given(cases(min_records=10))
def test_chunk_check_agrees_with_brute_force_on_merged_chunks(case):
    """Merging two record chunks row by row keeps the shape but exposes their combinations."""
    records, groups, k, m, seed = case
    assume(m >= 2)
    result, dataset = _run(records, groups, k, m, seed)
    doc = read_doc(result.release.to_bytes())
    movable = [c for c in doc["clusters"] if len(c["record_chunks"]) >= 2]
    assume(movable)
    first, second = movable[0]["record_chunks"][:2]
    # codes sorted inside the merged subrecords: the layout requires it (issue 18)
    movable[0]["record_chunks"][:2] = [[sorted(a + b) for a, b in zip(first, second,
                                                                        strict=True)]]
    report = check_km(_files(doc), dataset, k, m)
    smallest = _min_chunk_count(doc, m)
    assert _requirement(report, "chunk k^m-anonymity").passed == (smallest >= k)
    assert _requirement(report, "chunk k^m-anonymity").evidence["support"] == smallest


@FAST
@given(cases(min_records=10))
def test_rejects_a_cluster_smaller_than_k(case):
    records, groups, k, m, seed = case
    result, dataset = _run(records, groups, k, m, seed)
    doc = read_doc(result.release.to_bytes())
    big = max(doc["clusters"], key=lambda c: c["size"])
    cut = min(k - 1, big["size"] - 1)
    for joint in doc["joint_clusters"]:        # the joint cluster keeps its records
        if big["id"] in joint["clusters"]:
            joint["clusters"].append("SMALL")
    small = {"id": "SMALL", "size": cut, "item_chunk": list(big["item_chunk"]),
             "record_chunks": [ch[:cut] for ch in big["record_chunks"]]}
    big["record_chunks"] = [ch[cut:] for ch in big["record_chunks"]]
    big["size"] -= cut
    doc["clusters"].append(small)
    report = check_km(_files(doc), dataset, k, m)
    assert not report.holds
    structure = _requirement(report, "structure")
    assert not structure.passed
    # labels are positions since issue 18: the appended cluster is the last one
    small_label = f"P{len(doc['clusters'])}"
    assert any(f"cluster {small_label} has" in p for p in structure.evidence["problems"])


# --------------------------------------------------------------------------- fixed cases
@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(3)
    records = [sorted(set(rng.choice(CODES, size=rng.integers(1, 6)).tolist()))
               for _ in range(60)]
    result, dataset = _run(records, [i % 4 for i in range(len(CODES))], 3, 2, 1)
    return result, dataset


def planted_code_report(sample, code: str = "999.9"):
    """The verifier's report on the sample's release with ``code`` added to one subrecord of
    a record chunk: a chunk itemset of support 1, and a code no original record has."""
    result, dataset = sample
    doc = read_doc(result.release.to_bytes())
    cluster = next(c for c in doc["clusters"] if c["record_chunks"])
    chunk = cluster["record_chunks"][0]
    victim = next(i for i, s in enumerate(chunk) if s)
    chunk[victim] = chunk[victim] + [code]
    return check_km(_files(doc), dataset, 3, 2)


def test_low_support_chunk_is_named(sample):
    report = planted_code_report(sample)
    req = _requirement(report, "chunk k^m-anonymity")
    assert not req.passed and "999.9" in req.evidence["itemset"]
    assert req.evidence["support"] == 1
    assert not _requirement(report, "truthfulness").passed


def test_truthfulness_catches_a_dropped_code(sample):
    result, dataset = sample
    doc = read_doc(result.release.to_bytes())
    # drop a code from every subrecord of one chunk: its count in the release falls below D
    cluster = next(c for c in doc["clusters"] if c["record_chunks"])
    gone = cluster["record_chunks"][0][0][0] if cluster["record_chunks"][0][0] else None
    gone = gone or next(t for s in cluster["record_chunks"][0] for t in s)
    cluster["record_chunks"][0] = [[t for t in s if t != gone]
                                   for s in cluster["record_chunks"][0]]
    for c in doc["clusters"]:
        for ch in c["record_chunks"]:
            for s in ch:
                if gone in s:
                    s.remove(gone)
        if gone in c["item_chunk"]:
            c["item_chunk"].remove(gone)
    for j in doc["joint_clusters"]:
        for ch in j["shared_chunks"]:
            for s in ch:
                if gone in s:
                    s.remove(gone)
    report = check_km(_files(doc), dataset, 3, 2)
    truth = _requirement(report, "truthfulness")
    assert not truth.passed and gone in truth.measured


def test_declared_parameters_must_match(sample):
    result, dataset = sample
    report = check_km({RELEASE_FILE: result.release.to_bytes()}, dataset, 4, 2)
    assert not _requirement(report, "release format").passed
    assert not report.holds


def test_record_count_must_match_the_original(sample):
    result, dataset = sample
    fewer = Dataset.from_records([["100.0"]] * 5)
    report = check_km({RELEASE_FILE: result.release.to_bytes()}, fewer, 3, 2)
    assert not _requirement(report, "structure").passed


def _edited(result, edit) -> bytes:
    """The release with its rows edited (a list of row dicts, in file order)."""
    rows = doc_rows(read_doc(result.release.to_bytes()))
    edit(rows)
    return write_table(table_of(rows))


def _swap_first_subrecords(rows):
    """Subrecords 0 and 1 of the first record chunk change places (codes kept)."""
    at = [i for i, r in enumerate(rows) if r["chunk"] == 1 and r["subrecord"] in (0, 1)
          and r["group"] == rows[0]["group"]]
    first = [rows[i] for i in at if rows[i]["subrecord"] == 0]
    second = [rows[i] for i in at if rows[i]["subrecord"] == 1]
    rows[at[0]:at[-1] + 1] = second + first


def _renumber_cluster(rows):
    for r in rows:
        if r["group"] == "P1":
            r["group"] = "P01"


def _repeat_a_code(rows):
    at = next(i for i, r in enumerate(rows) if r["chunk"] >= 1 and r["code"] is not None)
    rows.insert(at, dict(rows[at]))


def _skip_a_subrecord(rows):
    gone = [r for r in rows if r["group"] == "P1" and r["chunk"] == 1 and r["subrecord"] == 1]
    for r in gone:
        rows.remove(r)


def _null_beside_a_code(rows):
    at = next(i for i, r in enumerate(rows) if r["chunk"] >= 1 and r["code"] is not None)
    rows.insert(at, {**rows[at], "code": None})


def _item_chunk_missing(rows):
    rows[:] = [r for r in rows if not (r["group"] == "P1" and r["chunk"] == 0)]


def _size_varies(rows):
    rows[0]["size"] += 1


@pytest.mark.parametrize("edit, message", [
    (_swap_first_subrecords, "subrecords are not numbered 0, 1"),
    (_renumber_cluster, "are not P1, P2, … then J1"),
    (_repeat_a_code, "not sorted and distinct"),
    (_skip_a_subrecord, "subrecords are not numbered 0, 1"),
    (_null_beside_a_code, "a null code shares a subrecord"),
    (_item_chunk_missing, "chunks are not numbered 0 (item chunk)"),
    (_size_varies, "size differs between rows"),
])
def test_a_release_out_of_its_layout_fails_closed(sample, edit, message):
    result, dataset = sample
    report = check_km({RELEASE_FILE: _edited(result, edit)}, dataset, 3, 2)
    assert not report.holds
    assert message in report.requirements[0].measured
    assert all(not r.passed for r in report.requirements)


def test_rows_in_another_order_fail_closed(sample):
    """The declared order is the only one: the same rows reversed are refused."""
    result, dataset = sample
    table = table_of(doc_rows(read_doc(result.release.to_bytes())))
    reordered = write_table(table.take(list(range(len(table)))[::-1]))
    report = check_km({RELEASE_FILE: reordered}, dataset, 3, 2)
    assert not report.holds and all(not r.passed for r in report.requirements)


@pytest.mark.parametrize("payload, message", [
    (b"not parquet", "not a readable Parquet file"),
    (write_table(table_of([])), "has no rows"),
])
def test_malformed_release_fails_closed(sample, payload, message):
    _, dataset = sample
    report = check_km({RELEASE_FILE: payload}, dataset, 3, 2)
    assert not report.holds
    assert message in report.requirements[0].measured
    assert all(not r.passed for r in report.requirements)


def test_extra_column_metadata_or_statistics_fail_closed(sample):
    result, dataset = sample
    table = table_of(doc_rows(read_doc(result.release.to_bytes())))
    flagged = table.append_column("flag", pa.array([0] * len(table)))
    cases = [
        (write_table(flagged), "declared columns"),
        (write_table(table.replace_schema_metadata({"note": "x"}), store_schema=True),
         "key-value metadata"),
        (write_table(table, write_statistics=True), "column statistics"),
        (write_table(table.set_column(0, "k", table["k"].cast("int64"))), "not int32"),
    ]
    for payload, message in cases:
        report = check_km({RELEASE_FILE: payload}, dataset, 3, 2)
        assert not report.holds and message in report.requirements[0].measured, message


def test_a_chunk_shorter_than_its_cluster_is_a_structure_problem(sample):
    result, dataset = sample

    def drop_last(rows):
        size = rows[0]["size"]
        rows[:] = [r for r in rows if not (r["group"] == "P1" and r["chunk"] == 1
                                           and r["subrecord"] == size - 1)]
    report = check_km({RELEASE_FILE: _edited(result, drop_last)}, dataset, 3, 2)
    structure = _requirement(report, "structure")
    assert not structure.passed and "cluster P1 record chunk 1 lists" in structure.measured


def test_missing_release_file(sample):
    _, dataset = sample
    report = check_km({"other.json": b"{}"}, dataset, 3, 2)
    assert not report.holds and RELEASE_FILE in report.requirements[0].measured


def test_overlapping_domains_are_rejected(sample):
    result, dataset = sample
    doc = copy.deepcopy(read_doc(result.release.to_bytes()))
    cluster = next(c for c in doc["clusters"] if c["record_chunks"])
    code = next(t for s in cluster["record_chunks"][0] for t in s)
    cluster["item_chunk"] = sorted(cluster["item_chunk"] + [code])   # the layout sorts them
    report = check_km(_files(doc), dataset, 3, 2)
    structure = _requirement(report, "structure")
    assert not structure.passed and code in structure.measured
