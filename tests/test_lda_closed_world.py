"""LDA releases are closed-world, carry no cluster id, count their records and say when their
utility is no better than publishing nothing (issue 14).

* The per-record ``cluster`` id was numbered in the order the clustering formed clusters (the
  first starts at the record farthest from the most frequent trajectory): data-derived and
  redundant with the trajectory, so it is gone; lines are ordered by patient id.
* Finding 4: an extra file or field fails verification, naming it.
* Finding 5: a release whose every trajectory is empty publishes nothing (0 records).
* Low utility: AvgRE near 1 — what publishing nothing scores — is flagged.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.governance.pseudonyms import KEY_ENV, pseudonymize_records, pseudonymizer
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.closed_world import to_json_schema, violations
from ehr_release.privacy.formats.lda import SCHEMA, count_records
from ehr_release.release.verification import as_released, verify_release
from ehr_release.samples.sample import generate_sample
from ehr_release.utility.lda import MIN_GAIN_OVER_NOTHING, below_baseline

NAMES = ["lda", "lda-baseline"]
RID = "lda-closed-world"


@pytest.fixture(scope="module")
def sample() -> Dataset:
    return generate_sample(90, seed=3, longitudinal=True)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "cd" * 32)


def _release(name: str, dataset: Dataset, k: int = 3):
    entry = registry.get(name)
    params = entry.parse({"k": str(k)})
    files = entry.anonymize(dataset, params, None)
    # as the flow publishes it: source ids replaced by this release's pseudonyms
    files[entry.id_file] = pseudonymize_records(files[entry.id_file], pseudonymizer(RID))
    return entry, params, files


def _lines(files) -> list[dict]:
    return [json.loads(x) for x in files["trajectories.jsonl"].decode().splitlines()]


def _with_lines(files, lines) -> dict[str, bytes]:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines).encode()
    return {**files, "trajectories.jsonl": data}


def _closed(report):
    return next(r for r in report.requirements if r.name == "closed world")


@pytest.mark.parametrize("name", NAMES)
def test_release_has_no_cluster_id_and_orders_lines_by_patient_id(name, sample):
    entry = registry.get(name)
    files = entry.anonymize(sample, entry.parse({"k": "3"}), None)
    lines = _lines(files)
    assert all(list(r) == ["patient_id", "trajectory"] for r in lines)
    assert [r["patient_id"] for r in lines] == sorted(sample.patient_ids)
    assert "clusters" not in json.loads(files["lda.json"])


@pytest.mark.parametrize("name", NAMES)
def test_a_published_release_is_closed_world_and_verifies(name, sample):
    entry, params, files = _release(name, sample)
    assert entry.schema is SCHEMA and entry.attack is not None
    assert list(violations(files, SCHEMA)) == []
    report = verify_release(entry, files, sample, params, RID)
    assert report.holds, report.failures
    assert _closed(report).passed


@pytest.mark.parametrize("name", NAMES)
def test_finding4_an_extra_file_fails_by_position(name, sample):
    entry, params, files = _release(name, sample)
    raw = "\n".join(" ".join(c for c, _ in t) for t in sample.trajectories()).encode()
    report = verify_release(entry, {**files, "codes.txt": raw}, sample, params, RID)
    assert not report.holds and not _closed(report).passed
    assert "1 undeclared file at position" in _closed(report).measured
    assert "codes.txt" not in _closed(report).measured


@pytest.mark.parametrize("name", NAMES)
def test_a_planted_per_record_field_fails_by_position(name, sample):
    """A per-record value that singles one patient out (its true age at first diagnosis)."""
    entry, params, files = _release(name, sample)
    lines = _lines(files)
    lines[0]["first_age"] = 57
    report = verify_release(entry, _with_lines(files, lines), sample, params, RID)
    assert not report.holds and not _closed(report).passed
    assert "line 1: an undeclared field in the record" in _closed(report).measured
    assert "first_age" not in _closed(report).measured


@pytest.mark.parametrize("name", NAMES)
def test_the_removed_cluster_id_and_count_fail_the_closed_world(name, sample):
    entry, params, files = _release(name, sample)
    lines = [{"patient_id": r["patient_id"], "cluster": i, "trajectory": r["trajectory"]}
             for i, r in enumerate(_lines(files))]
    report = verify_release(entry, _with_lines(files, lines), sample, params, RID)
    assert not report.holds and "undeclared field in the record" in _closed(report).measured
    meta = {**json.loads(files["lda.json"]), "clusters": 30}
    report = verify_release(entry, {**files, "lda.json": json.dumps(meta).encode()}, sample,
                            params, RID)
    assert not report.holds and "lda.json: an undeclared field" in _closed(report).measured


def test_wrong_value_types_fail_the_closed_world(sample):
    entry, params, files = _release("lda", sample)
    lines = _lines(files)
    lines[1]["trajectory"] = [["401", [30, 31, 32]]] if lines[1]["trajectory"] else [["401"]]
    report = verify_release(entry, _with_lines(files, lines), sample, params, RID)
    assert not _closed(report).passed and "trajectory" in _closed(report).measured


@pytest.mark.parametrize("name", NAMES)
def test_finding5_count_records(name, sample):
    entry, _, files = _release(name, sample)
    assert entry.count_records is count_records
    lines = _lines(files)
    assert count_records(files) == sum(1 for r in lines if r["trajectory"]) > 0
    emptied = _with_lines(files, [{**r, "trajectory": []} for r in lines])
    assert count_records(emptied) == 0
    assert count_records({**files, "trajectories.jsonl": b""}) == 0


_ODD_LINES = [
    b'{"patient_id": "a", "trajectory": [["401", [33, 33]]]}',
    b'{"patient_id": "b", "trajectory": []}',
    b'{"patient_id": "c", "trajectory": {"x": 1}}',
    b'{"patient_id": "d"}',
    b'[1, 2]',
    b'{not json',
    b'{"patient_id": "e", "trajectory": [NaN]}',  # json.loads reads it, orjson does not
    b'{"trajectory": [], "trajectory": [1]}',  # a repeated key: the last one counts
    b'  ',
    b'\xe2\x80\x83',  # a Unicode-only blank line
    b'{"patient_id": "\xff", "trajectory": [1]}',  # not UTF-8
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_ODD_LINES), max_size=8), st.booleans())
def test_count_records_column_wise_counts_what_the_line_reader_counts(lines, newline):
    from ehr_release.privacy.formats.lda import _count_lines

    data = b"\n".join(lines) + (b"\n" if newline else b"")
    assert count_records({"trajectories.jsonl": data}) == _count_lines(data)


def test_low_utility_is_flagged_against_publishing_nothing(sample):
    entry, params, files = _release("lda", sample)
    lines = _lines(files)
    emptied = _with_lines(files, [{**r, "trajectory": []} for r in lines])
    released = as_released(entry, sample, RID)  # evaluate matches records by pseudonym
    report = entry.evaluate(emptied, released, params, None)
    assert report.metrics["AvgRE"] == 1.0
    assert len(report.below_baseline) == 1
    assert "publishing nothing" in report.below_baseline[0]


def test_below_baseline_threshold():
    assert below_baseline(0.997, 40)  # the example: 0.3 % better than nothing
    assert below_baseline(1.2, 40)
    assert not below_baseline(1 - MIN_GAIN_OVER_NOTHING - 0.01, 40)
    assert not below_baseline(1.0, 0)  # no workload query: nothing to compare


def test_a_useful_release_is_not_flagged():
    """Every trajectory repeated k times: k-anonymous as is, AvgRE 0."""
    trajs = [[("401.1", 40), ("250.00", 42)], [("272.4", 60)], [("428.0", 70), ("401.9", 71)]]
    records = [t for t in trajs for _ in range(3)]
    ds = Dataset.from_records(records, patient_ids=[f"p{i}" for i in range(len(records))])
    entry = registry.get("lda")
    params = entry.parse({"k": "3"})
    files = entry.anonymize(ds, params, None)
    report = entry.evaluate(files, ds, params, None)
    assert report.metrics["AvgRE"] == pytest.approx(0.0)
    assert report.below_baseline == []


def test_every_published_field_is_reviewed():
    for file in SCHEMA.files:
        assert file.doc and file.fields_doc
        assert to_json_schema(file.root)["additionalProperties"] is False
    records = SCHEMA.file("trajectories.jsonl")
    assert {"patient_id", "trajectory", "line order", "cluster (removed)"} <= set(
        records.fields_doc)
    meta = SCHEMA.file("lda.json")
    assert set(meta.root.fields) <= set(meta.fields_doc)
