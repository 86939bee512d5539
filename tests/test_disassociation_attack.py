"""The k^m attack audit on disassociated releases (issue 14).

It must never fail a correct release, and it must find every planted narrowing: a code left
on one subrecord (a record unique under one code), a per-record field, a non-canonical code
order, and chunks published without shuffling (positions that link a record's pieces).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.algorithms.disassociation import disassociate, encode_code_sets
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.attacks import disassociation as attack_module
from ehr_release.privacy.attacks.disassociation import attack
from ehr_release.release.verification import attack_release
from ehr_release.samples.sample import generate_sample
from ehr_release.utility.disassociation import below_nothing
from tests.disassociation_layout import (
    RELEASE_FILE,
    doc_rows,
    files_of,
    read_doc,
    table_of,
    unshuffled,
    write_table,
)

CODES = [f"{c:03d}.{d}" for c in range(100, 104) for d in range(4)]
FAST = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def cases(draw, min_records: int = 6):
    n = draw(st.integers(min_records, 40))
    vocab = draw(st.integers(3, len(CODES)))
    # One strategy for every record: making one per record cost more than the test.
    record = st.lists(st.sampled_from(CODES[:vocab]), max_size=6)
    records = [sorted(set(draw(record))) for _ in range(n)]
    k = draw(st.integers(2, min(4, n)))
    m = draw(st.integers(1, 3))
    groups = draw(st.lists(st.integers(-1, 3), min_size=len(CODES), max_size=len(CODES)))
    return records, groups, k, m, draw(st.integers(0, 2**16))


def _release(records, groups, k, m, rng):
    enc = encode_code_sets(records)
    constraint_of = np.array([groups[CODES.index(c)] for c in enc.codes], dtype=np.int64)
    result = disassociate(enc, k, m, constraint_of, rng)
    return read_doc(result.release.to_bytes()), Dataset.from_records(records)


def _files(doc) -> dict[str, bytes]:
    return files_of(doc)


def plant_unique(doc) -> bool:
    """Leave one code of a record chunk on a single subrecord (or move an item-chunk code
    into a new chunk, on one subrecord): that record is unique under one code."""
    for cluster in doc["clusters"]:
        for chunk in cluster["record_chunks"]:
            held = [s for s in chunk if s]
            if held:
                code = held[0][0]
                for s in chunk[1:] if chunk[0] and chunk[0][0] == code else chunk:
                    if code in s and s is not held[0]:
                        s.remove(code)
                return True
        if cluster["item_chunk"]:
            code = cluster["item_chunk"].pop(0)
            cluster["record_chunks"].append([[code]] + [[] for _ in range(cluster["size"] - 1)])
            return True
    return False


# --------------------------------------------------------------------------- correct releases
@pytest.mark.parametrize("k, m", [(3, 1), (3, 2), (5, 2), (3, 3)])
def test_correct_releases_pass(k, m):
    entry = registry.get("disassociation")
    dataset = generate_sample(400, seed=k * 10 + m)
    params = entry.parse({"k": str(k), "m": str(m)})
    files = entry.anonymize(dataset, params, np.random.default_rng(k + m))
    report = attack_release(entry, files, dataset, params, "r1")
    assert report.passed, report.to_dict()
    assert report.exhaustive and report.smallest_candidate_set >= k
    assert report.knowledge_sets_tried > 0 and report.seconds >= 0


def test_report_names_no_code_or_patient():
    entry = registry.get("disassociation")
    dataset = generate_sample(300, seed=3)
    params = entry.parse({"k": "3", "m": "2"})
    files = entry.anonymize(dataset, params, np.random.default_rng(3))
    doc = read_doc(files[RELEASE_FILE])
    plant_unique(doc)
    report = attack(_files(doc), dataset, params)
    # whole tokens: a 3-digit code may be a group of a count such as "17,389"
    tokens = {t.strip(".,") for t in re.findall(r"[\w.,-]+", json.dumps(report.to_dict()))}
    codes = {c for s in dataset.code_sets() for c in s}
    assert not report.passed
    assert not tokens & codes
    assert not tokens & set(dataset.patient_ids)


@FAST
@given(cases())
def test_the_attack_never_fails_a_correct_release(case):
    records, groups, k, m, seed = case
    doc, dataset = _release(records, groups, k, m, np.random.default_rng(seed))
    report = attack(_files(doc), dataset, {"k": k, "m": m})
    assert report.passed, report.to_dict()


# --------------------------------------------------------------------------- planted narrowing
@FAST
@given(cases())
def test_a_record_made_unique_is_found(case):
    records, groups, k, m, seed = case
    doc, dataset = _release(records, groups, k, m, np.random.default_rng(seed))
    if not plant_unique(doc):          # no codes at all: nothing to plant
        return
    report = attack(_files(doc), dataset, {"k": k, "m": m})
    assert not report.passed and report.smallest_candidate_set < k


@FAST
@given(cases())
def test_a_per_record_field_is_found(case):
    records, groups, k, m, seed = case
    doc, dataset = _release(records, groups, k, m, np.random.default_rng(seed))
    table = table_of(doc_rows(doc))              # a flag on the first row only
    flagged = table.append_column("record_flag", pa.array([1] + [0] * (len(table) - 1)))
    report = attack({RELEASE_FILE: write_table(flagged)}, dataset, {"k": k, "m": m})
    assert not report.passed and report.smallest_candidate_set < k
    assert "undeclared" in report.measured


def test_a_non_canonical_code_order_is_found():
    dataset = generate_sample(300, seed=4)
    entry = registry.get("disassociation")
    params = entry.parse({"k": "3", "m": "2"})
    doc = read_doc(entry.anonymize(dataset, params, np.random.default_rng(4))[RELEASE_FILE])
    sub = next(s for c in doc["clusters"] for ch in c["record_chunks"] for s in ch
               if len(s) >= 2)
    sub.reverse()                      # the order of two codes can carry a per-record bit
    report = attack(_files(doc), dataset, params)
    assert not report.passed and "non-canonical" in report.measured


@pytest.mark.parametrize("k, m", [(3, 1), (3, 2), (5, 2), (3, 3)])
def test_unshuffled_chunks_are_read_positionally(k, m):
    """Chunks in record order link each record's subrecords: the attack must read them."""
    entry = registry.get("disassociation")
    dataset = generate_sample(2000, seed=3)
    params = entry.parse({"k": str(k), "m": str(m)})
    with unshuffled():
        files = entry.anonymize(dataset, params, np.random.default_rng(1))
    report = attack(files, dataset, params)
    assert not report.passed and report.smallest_candidate_set < k
    assert "read as records" in report.measured
    shuffled = entry.anonymize(dataset, params, np.random.default_rng(1))
    assert attack(shuffled, dataset, params).passed


def test_the_positional_reading_needs_evidence():
    """Too few chunks to tell record order from shuffles: no positional reading, no alarm."""
    records = [["100.0", "100.1"], ["100.0"], ["100.1"], ["100.0", "100.1"], [], ["100.0"]]
    with unshuffled():
        doc, dataset = _release(records, [-1] * len(CODES), 2, 2, np.random.default_rng(1))
    test = attack(_files(doc), dataset, {"k": 2, "m": 2})
    assert "read as records" not in test.measured


@FAST
@given(cases(min_records=8))
def test_fast_path_matches_direct_enumeration(case):
    """The vectorized m ≤ 2 counts equal the per-cluster enumeration used for m > 2."""
    records, groups, k, _, seed = case
    doc, dataset = _release(records, groups, k, 2, np.random.default_rng(seed))
    names, indptr, local = attack_module.original_records(dataset)
    r = attack_module.read_release(_files(doc)[RELEASE_FILE], names)
    d = attack_module.build_domain(r)
    index = {name: i for i, name in enumerate(r.names)}
    ids = np.array([index[x] for x in names], dtype=np.int64)
    by = attack_module.ByCluster(r, d, positional=True)
    k1, v1, k2, v2 = attack_module.unlinked_candidates(r, d, 2)
    p1, w1, p2, w2 = attack_module.positional_candidates(r, 2)
    c = r.n_codes
    for row in range(len(indptr) - 1):
        codes = sorted(ids[local[indptr[row]:indptr[row + 1]]].tolist())
        for i, a in enumerate(codes):
            assert attack_module.lookup(k1, v1, np.array([a]))[0] == by.candidates((a,), False)
            assert attack_module.lookup(p1, w1, np.array([a]))[0] == by.candidates((a,), True)
            for b in codes[i + 1:]:
                key = np.array([a * c + b])
                assert attack_module.lookup(k2, v2, key)[0] == by.candidates((a, b), False)
                assert attack_module.lookup(p2, w2, key)[0] == by.candidates((a, b), True)


# --------------------------------------------------------------------------- the wall
def test_the_attack_shares_no_code_with_algorithm_or_verifier():
    imported: set[str] = set()
    sources = sorted(Path(attack_module.__file__).parent.glob("*.py"))
    assert len(sources) > 1          # the attack is a package: every module of it is read
    for path in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported |= {node.module for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
        imported |= {alias.name for node in ast.walk(tree)
                     if isinstance(node, ast.Import) for alias in node.names}
    assert not any(m.startswith("ehr_release.algorithms") for m in imported)
    assert "ehr_release.privacy.disassociation" not in imported
    assert "ehr_release.privacy.itemset_counts" not in imported


def test_below_baseline_when_no_better_than_publishing_nothing():
    assert below_nothing({"ARE W1 (estimator)": 0.2, "ARE W2 (estimator)": 0.6}) == []
    worse = below_nothing({"ARE W1 (estimator)": 0.2, "ARE W2 (estimator)": 1.3})
    assert len(worse) == 1 and "ARE W2" in worse[0] and "publishing nothing" in worse[0]
    assert below_nothing({"ARE W2 (estimator)": float("nan")}) == []


def test_what_the_layout_does_not_declare_is_assumed_to_single_out():
    """Rows out of the declared order, file metadata or statistics can carry a per-record
    value: the attack assumes candidate set 1 (issue 18 layout)."""
    entry = registry.get("disassociation")
    dataset = generate_sample(300, seed=5)
    params = entry.parse({"k": "3", "m": "2"})
    rows = doc_rows(read_doc(
        entry.anonymize(dataset, params, np.random.default_rng(5))[RELEASE_FILE]))
    table = table_of(rows)
    # subrecords 1 and 0 of the first record chunk listed in that order
    at = [i for i, r in enumerate(rows) if (r["group"], r["chunk"]) == ("P1", 1)
          and r["subrecord"] < 2]
    order = [*range(at[0]), *[i for i in at if rows[i]["subrecord"] == 1],
             *[i for i in at if rows[i]["subrecord"] == 0], *range(at[-1] + 1, len(rows))]
    swapped = table.take(order)
    for payload in (write_table(swapped),
                    write_table(table.replace_schema_metadata({"note": "x"}), store_schema=True),
                    write_table(table, write_statistics=True)):
        report = attack({RELEASE_FILE: payload}, dataset, params)
        assert not report.passed and report.smallest_candidate_set == 1, report.measured
    assert attack({RELEASE_FILE: write_table(table)}, dataset, params).passed
