"""Disassociation's closed world (issues 14, 18): the release is exactly its declared layout.

Regression for finding 4 (an undeclared file or field passed verification) and the planted
side channel every algorithm must be tested with: a per-record field added to a correct
release isolates one patient, and verification fails naming the field.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ehr_release import registry
from ehr_release.documents.formats_doc import how_to_load
from ehr_release.privacy.closed_world import violations
from ehr_release.privacy.formats.disassociation import RELEASE_FILE, SCHEMA, count_records
from ehr_release.release.verification import verify_release
from ehr_release.samples.sample import generate_sample
from tests.disassociation_layout import write_table


@pytest.fixture(scope="module")
def entry():
    return registry.get("disassociation")


@pytest.fixture(scope="module")
def case(entry):
    dataset = generate_sample(300, seed=14)
    params = entry.parse({"k": "3", "m": "2"})
    files = entry.anonymize(dataset, params, np.random.default_rng(14))
    return dataset, params, files


def _closed(report):
    return next(r for r in report.requirements if r.name == "closed world")


def _with_column(files, name, values):
    """The release with one more column (a per-row value next to the declared ones)."""
    table = pq.read_table(io.BytesIO(files[RELEASE_FILE]))
    return {**files, RELEASE_FILE: write_table(table.append_column(name, values(len(table))))}


def test_entry_declares_schema_attack_and_count(entry):
    assert entry.schema is SCHEMA and entry.attack is not None
    assert entry.count_records is count_records


def test_a_correct_release_is_closed_world(entry, case):
    dataset, params, files = case
    assert list(violations(files, SCHEMA)) == []
    report = verify_release(entry, files, dataset, params, "r1")
    assert report.holds, report.to_dict()
    assert "every field declared" in _closed(report).measured


def test_an_undeclared_file_fails_verification(entry, case):
    """Finding 4: a stray file (here raw code sets without ids) passed verification."""
    dataset, params, files = case
    raw = "\n".join(",".join(sorted(s)) for s in dataset.code_sets()).encode()
    report = verify_release(entry, {**files, "codes.csv": raw}, dataset, params, "r1")
    assert not report.holds
    assert "1 undeclared file at position 1" in _closed(report).measured


def test_a_planted_per_record_column_fails_by_position(entry, case):
    """A per-record flag on the first row singles one subrecord out."""
    dataset, params, files = case
    planted = _with_column(files, "record_flag", lambda n: pa.array([1] + [0] * (n - 1)))
    report = verify_release(entry, planted, dataset, params, "r1")
    assert not report.holds
    assert "1 undeclared column at position" in _closed(report).measured
    assert "record_flag" not in _closed(report).measured  # where, never the name


def test_a_column_of_another_type_fails(entry, case):
    """A number where a code belongs (a per-record count) is refused by type."""
    dataset, params, files = case
    table = pq.read_table(io.BytesIO(files[RELEASE_FILE]))
    counts = pa.array(range(len(table)), pa.int32())
    changed = {**files, RELEASE_FILE: write_table(table.set_column(7, "code", counts))}
    report = verify_release(entry, changed, dataset, params, "r1")
    assert not report.holds and "'code' must be text" in _closed(report).measured


def test_an_extra_file_fails(entry, case):
    dataset, params, files = case
    report = verify_release(entry, {**files, "release.json": b"{}"}, dataset, params, "r1")
    assert not report.holds and "undeclared file at position" in _closed(report).measured


def test_the_release_loads_with_one_pandas_call(case):
    """The Load line of the datasheet: one call gives every published field."""
    dataset, _, files = case
    frame = pd.read_parquet(io.BytesIO(files[RELEASE_FILE]))
    assert list(frame.columns) == list(SCHEMA.file(RELEASE_FILE).columns)
    sizes = frame[frame["group"].str.startswith("P")].groupby("group", sort=False)["size"]
    assert int(sizes.first().sum()) == dataset.n_patients
    assert how_to_load(SCHEMA.file(RELEASE_FILE)) == 'pandas.read_parquet("release.parquet")'


def test_identical_input_gives_identical_bytes(entry, case):
    dataset, params, files = case
    again = entry.anonymize(dataset, params, np.random.default_rng(14))
    assert again[RELEASE_FILE] == files[RELEASE_FILE]
    meta = pq.ParquetFile(io.BytesIO(files[RELEASE_FILE])).metadata
    assert meta.metadata is None and not meta.row_group(0).column(0).is_stats_set


def test_count_records(case):
    dataset, _, files = case
    assert count_records(files) == dataset.n_patients
    assert count_records({}) == 0
    assert count_records({RELEASE_FILE: b"not parquet"}) == 0


def test_every_field_is_reviewed():
    (file,) = SCHEMA.files
    assert set(file.columns) <= set(file.fields_doc)
    assert {"(row order)", "(file metadata)"} <= set(file.fields_doc)
    assert file.doc and file.format == "parquet"
