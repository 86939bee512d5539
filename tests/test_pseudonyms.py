"""Releases that carry per-patient records never carry the source's patient ids."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ehr_release.core.errors import ConfigError
from ehr_release.governance.pseudonyms import (
    KEY_ENV,
    KEY_FILE,
    pseudonymize_dataset,
    pseudonymize_records,
    pseudonymizer,
    site_key,
)
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.identifiers import source_ids_requirement
from ehr_release.storage import runs
from ehr_release.storage.runs import Status
from tests.flow_helpers import CSV, request_for, run_approved, start

KEY = bytes(range(32))


def test_pseudonyms_depend_on_release_and_key_and_are_not_the_id():
    a, b = pseudonymizer("run-1", KEY), pseudonymizer("run-2", KEY)
    other_site = pseudonymizer("run-1", bytes(32))
    assert a("P1") == a("P1")  # stable within a release (resume, re-verification)
    assert a("P1") != b("P1")  # two releases cannot be joined on it
    assert a("P1") != other_site("P1")  # nobody without the key can recompute it
    assert a("P1") != a("P2")
    assert "P1" not in a("P1") and a("P1").startswith("R") and len(a("P1")) == 21


def test_records_are_renamed_and_reordered_and_nothing_else_changes():
    lines = [{"patient_id": f"P{i}", "codes": {"250": i}} for i in range(50)]
    data = "".join(json.dumps(r) + "\n" for r in lines).encode()
    p = pseudonymizer("run-1", KEY)
    out = [json.loads(line) for line in pseudonymize_records(data, p).decode().splitlines()]
    assert [r["patient_id"] for r in out] == sorted(p(f"P{i}") for i in range(50))
    by_id = {r["patient_id"]: r["codes"] for r in out}
    assert all(by_id[p(f"P{i}")] == {"250": i} for i in range(50))
    assert pseudonymize_records(b"", p) == b""


def test_dataset_view_matches_the_records():
    ds = Dataset.from_records([["250", "401"], ["272"]], patient_ids=["A", "B"])
    p = pseudonymizer("run-1", KEY)
    view = pseudonymize_dataset(ds, p)
    assert view.patient_ids == [p("A"), p("B")]
    assert view.code_sets() == ds.code_sets()
    assert set(view.diagnoses["patient_id"]) == {p("A"), p("B")}


def test_source_id_check_catches_ids_in_jsonl_json_and_csv():
    ids = ["MRN1", "MRN2"]
    clean = {"r.jsonl": b'{"patient_id": "R00", "codes": []}\n', "m.json": b"{}"}
    assert source_ids_requirement(clean, ids).passed
    assert source_ids_requirement({"c.json": b'{"a": 1}'}, ids).measured == \
        "the release carries no patient ids"
    for files in ({"r.jsonl": b'{"patient_id": "MRN2"}\n'},
                  {"m.json": b'{"rows": [{"x": {"patient_id": "MRN1"}}]}'},
                  {"t.csv": b"patient_id,age\nMRN1,3\n"}):
        req = source_ids_requirement(files, ids)
        assert not req.passed and req.evidence == {"leaked": 1}
        assert "MRN" not in json.dumps(req.evidence)  # reviewers see counts, not MRNs


def _parquet(table: dict) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table(table), out)
    return out.getvalue()


def test_source_id_check_reads_escaped_keys_split_lines_and_parquet():
    """Found on the way: a key written with an escape skipped the check's cheap test, a
    U+2028 inside a string split a line, and Parquet files were not read at all."""
    ids = ["MRN1", "MRN2"]
    for files in ({"r.jsonl": b'{"patient\\u005fid": "MRN1"}\n'},
                  {"r.jsonl": '{"note": "a\u2028b", "patient_id": "MRN2"}\n'.encode()},
                  {"r.parquet": _parquet({"patient_id": ["R1", "MRN1"]})},
                  {"r.parquet": _parquet({"rows": [{"patient_id": "MRN2"}]})}):
        req = source_ids_requirement(files, ids)
        assert not req.passed and req.evidence == {"leaked": 1}, files
    assert source_ids_requirement({"r.parquet": _parquet({"code": ["MRN1"]})}, ids).passed


def test_site_key_file_is_created_once_owner_only(ehr_home, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    first = site_key()
    path = ehr_home / KEY_FILE
    assert len(first) == 32 and site_key() == first
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not [p for p in ehr_home.iterdir() if p.name.startswith(f".{KEY_FILE}")]


@pytest.mark.parametrize("value, problem", [("zz", "hexadecimal"), ("ab" * 8, "at least 32")])
def test_bad_key_in_environment_is_named(monkeypatch, value, problem):
    monkeypatch.setenv(KEY_ENV, value)
    with pytest.raises(ConfigError, match=problem) as info:
        site_key()
    assert KEY_ENV in str(info.value)


def test_flow_publishes_per_patient_records_under_pseudonyms(env, tmp_path):
    _, out = env
    data = tmp_path / "mrn.csv"
    data.write_text(CSV.replace("S0", "MRN"))
    req = request_for(data, out, algorithm="patient-records")
    box = run_approved(req)
    assert box.get("result") == "published", box
    folder = out / "releases" / req.run_id
    text = (folder / "records.jsonl").read_text()
    assert "MRN" not in text
    ids = [json.loads(line)["patient_id"] for line in text.splitlines()]
    p = pseudonymizer(req.run_id)
    assert ids == sorted(p(f"MRN{i:02d}") for i in range(12))
    checks = {r["name"]: r for r in runs.latest_verification(req.run_id)["requirements"]}
    assert checks["direct identifiers removed"]["passed"]
    assert checks["truthful records"]["passed"]  # verified against the pseudonymized view


def test_undeclared_ids_fail_verification_and_nothing_is_published(env, tmp_path):
    _, out = env
    data = tmp_path / "mrn.csv"
    data.write_text(CSV.replace("S0", "MRN"))
    req = request_for(data, out, algorithm="undeclared-ids")
    thread, box = start(req)
    thread.join(120)
    assert runs.get_run(req.run_id).status == Status.FAILED.value
    assert "direct identifiers removed" in str(box.get("error"))
    assert not (out / "releases" / req.run_id).exists()
