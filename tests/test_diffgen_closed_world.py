"""The closed world of a DiffGen release: exactly groups (csv or parquet), cut.json and
ledger.json, each field declared (issue 14, findings 4 and the side-channel review)."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ehr_release.privacy.closed_world import violations
from ehr_release.privacy.formats import diffgen as formats
from ehr_release.registry.diffgen import ENTRY, count_records
from ehr_release.release.verification import verify_release
from tests.test_diffgen_counts_check import PREDICTORS, make_release, true_counts


@pytest.fixture(scope="module")
def release():
    return make_release(n=400, predictors=f"{PREDICTORS},codes", h=5)


def _closed(report):
    return next(r for r in report.requirements if r.name == "closed world")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_an_honest_release_is_closed_and_holds(fmt: str) -> None:
    data_files, data, params = make_release(n=300, h=4)
    params = {**params, "format": fmt}
    files = ENTRY.anonymize(data, params, np.random.default_rng(1))
    assert not list(violations(files, formats.SCHEMA))
    report = verify_release(ENTRY, files, data, params, None)
    assert report.holds, [r for r in report.failures]


def test_a_planted_per_group_column_fails_by_position(release) -> None:
    files, data, params = release
    groups = pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str, keep_default_na=False)
    groups.insert(2, "true_count", true_counts(files, data, params).astype(str))
    planted = {**files, "groups.csv": groups.to_csv(index=False).encode()}
    report = verify_release(ENTRY, planted, data, params, None)
    assert not report.holds
    assert "1 undeclared column at position 3" in _closed(report).measured
    assert "true_count" not in _closed(report).measured


def test_a_planted_field_in_the_ledger_fails_by_position(release) -> None:
    files, data, params = release
    ledger = json.loads(files["ledger.json"])
    ledger["charges"][-1]["true_total"] = data.n_patients
    planted = {**files, "ledger.json": json.dumps(ledger).encode()}
    report = verify_release(ENTRY, planted, data, params, None)
    assert not report.holds
    assert "undeclared field in charges[" in _closed(report).measured
    assert "true_total" not in _closed(report).measured


def test_a_planted_field_in_a_cut_attribute_fails(release) -> None:
    files, data, params = release
    cut = json.loads(files["cut.json"])
    cut["attributes"][0]["support"] = [3, 1, 4]
    planted = {**files, "cut.json": json.dumps(cut).encode()}
    report = verify_release(ENTRY, planted, data, params, None)
    assert not report.holds
    assert "attributes[0]" in _closed(report).measured


def test_an_extra_file_fails(release) -> None:
    files, data, params = release
    extra = {**files, "codes.txt": b"401.9;250.00\n"}
    report = verify_release(ENTRY, extra, data, params, None)
    assert not report.holds
    assert "1 undeclared file at position" in _closed(report).measured
    assert "codes.txt" not in _closed(report).measured


def test_both_groups_files_fail(release) -> None:
    files, data, params = release
    groups = pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str, keep_default_na=False)
    raw = io.BytesIO()
    groups.assign(count=groups["count"].astype("int64")).to_parquet(raw, index=False)
    both = {**files, "groups.parquet": raw.getvalue()}
    assert not verify_release(ENTRY, both, data, params, None).holds


def test_count_records_is_the_sum_of_released_counts(release) -> None:
    files, _, _ = release
    groups = pd.read_csv(io.BytesIO(files["groups.csv"]))
    assert count_records(files) == int(groups["count"].sum()) > 0
    zero = groups.assign(count=0).to_csv(index=False).encode()
    assert count_records({**files, "groups.csv": zero}) == 0


def test_every_file_documents_every_field() -> None:
    for schema in formats.SCHEMA.files:
        assert schema.doc and schema.fields_doc


def test_the_schema_does_not_import_the_algorithm() -> None:
    source = Path(formats.__file__).read_text()
    modules = {n.module for n in ast.walk(ast.parse(source))
               if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(m.startswith("ehr_release.algorithms") for m in modules), modules


@pytest.mark.parametrize("spelling", ["0{}", "+{}", " {}", "{}.0", "{}\u200b"])
def test_a_count_spelled_another_way_fails(release, spelling: str) -> None:
    """A count cell reads as the same number whether written 7, 07, +7 or 7.0, so a writer
    choosing the spelling row by row (e.g. by the parity of the true count) would publish a
    bit per row that no reader of the numbers sees: the closed world accepts only the one
    spelling ``to_csv`` writes."""
    files, data, params = release
    lines = files["groups.csv"].decode().split("\n")
    head, *rows = lines
    marked = [(",".join([*row.split(",")[:-1], spelling.format(row.split(",")[-1])])
               if row and i % 2 else row) for i, row in enumerate(rows)]
    planted = {**files, "groups.csv": "\n".join([head, *marked]).encode()}
    report = verify_release(ENTRY, planted, data, params, None)
    assert not _closed(report).passed
