"""Disassociation's closed world (issue 14): the release is exactly its declared shape.

Regression for finding 4 (an undeclared file or field passed verification) and the planted
side channel every algorithm must be tested with: a per-record field added to a correct
release isolates one patient, and verification fails naming the field.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ehr_release import registry
from ehr_release.privacy.closed_world import ListOf, MapOf, Nullable, Obj, violations
from ehr_release.privacy.formats.disassociation import RELEASE_FILE, SCHEMA, count_records
from ehr_release.sample import generate_sample
from ehr_release.verification import verify_release


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


def _with(files, edit):
    doc = json.loads(files[RELEASE_FILE])
    edit(doc)
    return {**files, RELEASE_FILE: json.dumps(doc).encode()}


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
    assert "undeclared file 'codes.csv'" in _closed(report).measured


def test_a_planted_per_record_field_fails_naming_it(entry, case):
    """A per-record flag aligned with the first record chunk singles one record out."""
    dataset, params, files = case

    def plant(doc):
        cluster = doc["clusters"][0]
        cluster["record_flag"] = [1] + [0] * (cluster["size"] - 1)

    report = verify_release(entry, _with(files, plant), dataset, params, "r1")
    assert not report.holds
    assert "record_flag" in _closed(report).measured


def test_a_planted_top_level_field_fails_naming_it(entry, case):
    dataset, params, files = case

    def plant(doc):
        doc["patients"] = [sorted(s) for s in dataset.code_sets()][:1]

    report = verify_release(entry, _with(files, plant), dataset, params, "r1")
    assert not report.holds and "patients" in _closed(report).measured


def test_a_count_where_a_subrecord_belongs_fails(entry, case):
    """A value of the wrong type inside a chunk (a per-record number) is refused."""
    dataset, params, files = case
    report = verify_release(entry, _with(files, lambda d: d["clusters"][0]["record_chunks"]
                                         .append([1] * d["clusters"][0]["size"])),
                            dataset, params, "r1")
    assert not report.holds and "record_chunks" in _closed(report).measured


def test_count_records(case):
    dataset, _, files = case
    assert count_records(files) == dataset.n_patients
    assert count_records({}) == 0
    assert count_records({RELEASE_FILE: b"not json"}) == 0


def _paths(spec, path=""):
    """Every field path of a spec, in the fields_doc notation (``a[].b``)."""
    if isinstance(spec, Nullable):
        yield from _paths(spec.spec, path)
    elif isinstance(spec, ListOf):
        yield from _paths(spec.item, f"{path}[]")
    elif isinstance(spec, Obj):
        for key, sub in spec.fields.items():
            here = f"{path}.{key}" if path else key
            yield here
            yield from _paths(sub, here)
    elif isinstance(spec, MapOf):
        yield from _paths(spec.value, f"{path}.*")


def test_every_field_is_reviewed():
    (file,) = SCHEMA.files
    documented = set(file.fields_doc)
    objects = {p for p in _paths(file.root) if not p.endswith("[]")}
    assert objects <= documented | {"clusters[].record_chunks[][]"}
    assert "clusters[].record_chunks[][]" in documented   # the subrecord and its order
    assert file.doc
