"""Issue 18: the verifier's vectorized readers give the figures of their plain definitions.

Verification at a million records must stay within 3× one vectorized pass over the original,
so the verifier counts pairs in place, reads labels and dictionaries with Arrow and skips
sorts of data already sorted. Each shortcut is checked here against the plain way it
replaced: the verdict may not depend on which one ran.
"""

from __future__ import annotations

import dataclasses
import io
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.disassociation import RELEASE_FILE, parse_release
from ehr_release.privacy.disassociation.arrays import (
    counted,
    distinct,
    pair_counts,
    pairs_within,
    row_pair_keys,
)
from ehr_release.privacy.disassociation.parse import _numbered
from ehr_release.privacy.disassociation.tables import (
    _factorized_codes,
    _original_rows,
    _record_of_rows,
)
from ehr_release.samples.sample import generate_sample
from tests.disassociation_layout import write_table


@st.composite
def csr_rows(draw):
    """Rows of ascending distinct codes below ``c``, as CSR, and ``c``."""
    c = draw(st.sampled_from([3, 12, 2000]))  # 2000² counters: the sorting path
    rows = draw(st.lists(st.sets(st.integers(0, c - 1), max_size=7), max_size=25))
    indptr = np.r_[0, np.cumsum([len(r) for r in rows])].astype(np.int64)
    codes = np.array([x for r in rows for x in sorted(r)], dtype=np.int64)
    return indptr, codes, c


@given(csr_rows())
@settings(max_examples=200, deadline=None)
def test_pair_counts_count_the_pairs_of_every_row(case):
    indptr, codes, c = case
    keys, counts = pair_counts(indptr, codes, c)
    a, b = pairs_within(indptr)
    expected = np.unique(codes[a] * c + codes[b], return_counts=True)
    assert keys.tolist() == expected[0].tolist() and counts.tolist() == expected[1].tolist()
    plain: dict[int, int] = {}
    for start, end in zip(indptr[:-1].tolist(), indptr[1:].tolist(), strict=True):
        for x, y in combinations(codes[start:end].tolist(), 2):
            plain[x * c + y] = plain.get(x * c + y, 0) + 1
    assert dict(zip(keys.tolist(), counts.tolist(), strict=True)) == plain


@given(csr_rows(), st.integers(0, 3))
@settings(max_examples=100, deadline=None)
def test_row_pair_keys_are_the_keys_of_the_pair_positions(case, base):
    indptr, codes, c = case
    row_base = (np.arange(len(indptr) - 1, dtype=np.int64) * base) * c * c
    a, b = pairs_within(indptr)
    row = np.searchsorted(indptr, a, "right") - 1
    expected = sorted((row_base[row] + codes[a] * c + codes[b]).tolist())
    blocks = row_pair_keys(indptr, codes, c, row_base)
    assert sorted(x for block in blocks for x in block.tolist()) == expected
    keys, counts = counted(np.array(expected[::-1], dtype=np.int64))
    unique = np.unique(np.array(expected, dtype=np.int64), return_counts=True)
    assert keys.tolist() == unique[0].tolist() and counts.tolist() == unique[1].tolist()


@given(st.lists(st.integers(-5, 40), max_size=30))
def test_distinct_is_sorted_unique_whether_or_not_the_input_was_sorted(values):
    for given_values in (values, sorted(values), sorted(set(values))):
        got = distinct(np.array(given_values, dtype=np.int64))
        assert got.tolist() == sorted(set(given_values))


def test_group_labels_are_numbered_only_in_their_one_spelling():
    labels = ["P1", "P2", "P10", "P01", "P0", "P+3", "P 4", "P4 ", "p5", "P٣", "P3.0",
              "J2", "PP6", "P", "P12", "P11", "P-1"]
    expected = [int(x[1:]) if x[1:].isascii() and x[1:].isdigit() and x[1] != "0"
                and str(int(x[1:])) == x[1:] and int(x[1:]) <= len(labels) else 0
                for x in (label if label.startswith("P") else "P?" for label in labels)]
    got = _numbered(pa.array(labels, pa.string()), "P").tolist()
    assert got == expected
    assert got[:4] == [1, 2, 10, 0] and got[-3:] == [12, 11, 0]
    assert _numbered(pa.array(labels, pa.string()), "J").tolist()[11] == 2
    assert _numbered(pa.array([], pa.string()), "P").tolist() == []
    assert _numbered(pa.array(["P1", None, "P2"], pa.string()), "P").tolist() == [1, 0, 2]


@pytest.mark.parametrize("column", [
    ["401.9", "250.00", "401.9", "042"],          # text: factorized as it is
    ["401.9", 250, "401.9", None],                 # not all text: as the text of each value
    [],
])
def test_codes_are_factorized_as_their_text_sorted(column):
    code, names = _factorized_codes(pd.Series(column, dtype=object))
    expected_code, expected_names = pd.factorize(pd.Series(column, dtype=object).astype(str),
                                                 sort=True)
    assert code.tolist() == expected_code.tolist()
    assert names == [str(x) for x in expected_names]


@pytest.mark.parametrize("ids", [
    ["a", "a", "b", "c", "c", "c", "a", "zz", "zz", "b"],  # runs, a repeat, an unknown id
    ["a"], [], ["b", None, None, "a", float("nan"), float("nan")],
    ["a", pd.NA, pd.NA, "b"],                              # no truth value: plain lookups
])
def test_records_of_rows_are_the_index_lookup_of_every_row(ids):
    patients = pd.Index(["c", "a", "b", None], dtype=object)
    ids = np.array(ids, dtype=object)
    assert _record_of_rows(patients, ids).tolist() == patients.get_indexer(ids).tolist()


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_original_records_are_each_patients_distinct_codes(order):
    """Rows sorted by patient and code skip the sort; any other order, repeats and rows of
    no listed patient give the same records."""
    records = [["250.00", "401.9"], [], ["042", "250.00", "401.9"], ["042"]]
    dataset = Dataset.from_records(records)
    diagnoses = dataset.diagnoses
    if order == "shuffled":
        extra = diagnoses.iloc[[0, 0, 3]].assign(patient_id=["p1", "p9", "p3"])
        diagnoses = pd.concat([diagnoses, extra]).sample(frac=1.0, random_state=3)
    names, indptr, local = _original_rows(Dataset(dataset.patients, diagnoses))
    got = [[names[x] for x in local[a:b]] for a, b in zip(indptr[:-1], indptr[1:], strict=True)]
    assert got == [sorted(r) for r in records]


@pytest.fixture(scope="module")
def release() -> bytes:
    entry = registry.get("disassociation")
    files = entry.anonymize(generate_sample(120, seed=14), entry.parse({"k": "3", "m": "2"}),
                            np.random.default_rng(14))
    return files[RELEASE_FILE]


def test_a_release_in_many_row_groups_parses_the_same(release):
    """Each row group has its own dictionaries (and labels that recur across them): the
    numbering of all of them at once gives the same arrays as one row group."""
    table = pq.read_table(io.BytesIO(release))
    once = parse_release({RELEASE_FILE: write_table(table, row_group_size=len(table))})
    split = parse_release({RELEASE_FILE: write_table(table, row_group_size=7)})
    assert pq.ParquetFile(io.BytesIO(write_table(table, row_group_size=7))).num_row_groups > 10
    for field in dataclasses.fields(once):
        a, b = getattr(once, field.name), getattr(split, field.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.tolist() == b.tolist(), field.name
        else:
            assert a == b, field.name
