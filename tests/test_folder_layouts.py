"""OMOP CDM, FHIR R4 bulk export and MIMIC-IV ``hosp`` folders (issue 35): the same
generated patients, rendered in each layout, read back as the same Dataset; bad input is
refused by file, line or row, and field, without the value in the stored message."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ehr_release.core.errors import InputError, stored_message
from ehr_release.ingest.readers import read_dataset
from ehr_release.model.dataset import AGE, CODE, PATIENT_ID, Dataset
from ehr_release.samples.sample import generate_sample
from ehr_release.samples.sample_layouts import WRITERS, numbered


@pytest.fixture(scope="module", params=["icd10", "icd9"])
def patients(request: pytest.FixtureRequest) -> Dataset:
    return numbered(generate_sample(40, seed=21, longitudinal=True, code_system=request.param))


def _render(dataset: Dataset, layout: str, tmp: Path) -> Path:
    target = tmp / (f"{layout}.csv" if layout == "csv" else layout)
    return WRITERS[layout](dataset, target)


def _core(ds: Dataset) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    pats = ds.patients[["age", "gender"]].sort_index()
    pats = pats.assign(age=pats["age"].astype("Int64"))
    diag = (ds.diagnoses[[PATIENT_ID, CODE, AGE]].sort_values([PATIENT_ID, CODE, AGE])
            .reset_index(drop=True))
    return pats, diag.assign(age=diag["age"].astype("Int64")), ds.code_system


@pytest.mark.parametrize("layout", ["omop", "fhir", "mimic4"])
def test_every_layout_reads_back_the_same_patients_as_the_csv(
        patients: Dataset, layout: str, tmp_path: Path) -> None:
    from_csv = read_dataset(_render(patients, "csv", tmp_path))
    from_folder = read_dataset(_render(patients, layout, tmp_path))
    csv_pats, csv_diag, csv_system = _core(from_csv)
    pats, diag, system = _core(from_folder)
    assert system == csv_system == patients.code_system
    pd.testing.assert_frame_equal(pats, csv_pats, check_index_type=False)
    pd.testing.assert_frame_equal(diag, csv_diag)
    # ... and the CSV itself is the generated patients.
    pd.testing.assert_frame_equal(csv_diag, _core(patients)[1])


def test_mimic4_keeps_admission_demographics_and_the_class(tmp_path: Path) -> None:
    source = numbered(generate_sample(30, seed=4, longitudinal=True, code_system="icd10"))
    ds = read_dataset(WRITERS["mimic4"](source, tmp_path / "hosp"))
    assert ds.class_column == "in_hospital_death"
    assert {"insurance", "marital_status", "race"} <= set(ds.patients.columns)
    assert (ds.patients["in_hospital_death"].to_numpy()
            == source.patients["in_hospital_death"].to_numpy()).all()
    # A MIMIC-IV root holding hosp/ is read the same.
    assert read_dataset(tmp_path).fingerprint() == ds.fingerprint()


def _omop(tmp_path: Path) -> Path:
    return WRITERS["omop"](numbered(generate_sample(12, seed=2, longitudinal=True,
                                                    code_system="icd10")), tmp_path / "omop")


def _edit_csv(path: Path, row: int, column: str, value: str) -> None:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[row - 1, column] = value
    frame.to_csv(path, index=False)


def test_omop_bad_code_is_refused_by_file_row_and_field(tmp_path: Path) -> None:
    folder = _omop(tmp_path)
    _edit_csv(folder / "condition_occurrence.csv", 3, "condition_source_value", "ZZZ999")
    with pytest.raises(InputError) as info:
        read_dataset(folder)
    assert str(info.value).startswith(f"file {folder / 'condition_occurrence.csv'}, row 3, "
                                      "column 'condition_source_value': malformed ICD-10 code")
    assert "ZZZ999" not in stored_message(info.value)


def test_omop_mixed_codes_are_refused(tmp_path: Path) -> None:
    folder = _omop(tmp_path)
    _edit_csv(folder / "condition_occurrence.csv", 2, "condition_source_value", "25000")
    with pytest.raises(InputError, match="row 1, column 'condition_source_value': extract "
                                         "mixes ICD-9-CM and ICD-10-CM"):
        read_dataset(folder)


@pytest.mark.parametrize(("table", "column", "value", "message"), [
    ("condition_occurrence.csv", "condition_start_date", "1800-01-01",
     "row 4, column 'condition_start_date': date is before the date of birth"),
    ("condition_occurrence.csv", "condition_start_date", "last week",
     "row 4, column 'condition_start_date': not a recognised date"),
    ("condition_occurrence.csv", "person_id", "999999",
     "row 4, column 'person_id': patient id is not in the patients table"),
    ("person.csv", "year_of_birth", "nineteen",
     "row 4, column 'year_of_birth': year of birth must be a whole number"),
    ("visit_occurrence.csv", "visit_start_date", "1700-06-01",
     "row 4, column 'visit_start_date': date is before the date of birth"),
])
def test_omop_bad_values_are_refused_by_row_and_field(
        tmp_path: Path, table: str, column: str, value: str, message: str) -> None:
    folder = _omop(tmp_path)
    _edit_csv(folder / table, 4, column, value)
    with pytest.raises(InputError, match=message) as info:
        read_dataset(folder)
    assert value not in stored_message(info.value)


def test_omop_missing_table_and_column(tmp_path: Path) -> None:
    folder = _omop(tmp_path)
    frame = pd.read_csv(folder / "person.csv", dtype=str).drop(columns=["year_of_birth"])
    frame.to_csv(folder / "person.csv", index=False)
    with pytest.raises(InputError, match="required column is missing"):
        read_dataset(folder)
    (folder / "condition_occurrence.csv").unlink()
    with pytest.raises(InputError, match="OMOP folder lacks the condition_occurrence table"):
        read_dataset(folder)


def test_omop_parquet_tables_are_read(tmp_path: Path) -> None:
    folder = _omop(tmp_path)
    expected = read_dataset(folder).fingerprint()
    for csv in folder.glob("*.csv"):
        pd.read_csv(csv, dtype=str, keep_default_na=False).to_parquet(csv.with_suffix(".parquet"))
        csv.unlink()
    assert read_dataset(folder).fingerprint() == expected


def _fhir(tmp_path: Path) -> Path:
    return WRITERS["fhir"](numbered(generate_sample(12, seed=2, longitudinal=True,
                                                    code_system="icd10")), tmp_path / "fhir")


def _edit_line(path: Path, line: int, edit) -> None:  # noqa: ANN001
    lines = path.read_text(encoding="utf-8").splitlines()
    resource = json.loads(lines[line - 1])
    edit(resource)
    lines[line - 1] = json.dumps(resource)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize(("file", "edit", "message"), [
    ("Condition.ndjson", lambda r: r["code"]["coding"][0].update(code="NOPE1"),
     "row 3, column 'Condition.code.coding.code': malformed ICD-10 code"),
    ("Condition.ndjson", lambda r: r["code"]["coding"][0].update(
        system="http://snomed.info/sct"),
     "row 3, column 'Condition.code.coding': has no ICD-10-CM or ICD-9-CM coding"),
    ("Condition.ndjson", lambda r: r.update(onsetDateTime="yesterday"),
     "row 3, column 'Condition.onsetDateTime': must be a full date"),
    ("Condition.ndjson", lambda r: r.update(subject={"reference": "Patient/777"}),
     "row 3, column 'Condition.subject': patient id is not in the patients table"),
    ("Patient.ndjson", lambda r: r.update(gender="M"),
     "row 3, column 'Patient.gender': must be male, female, other or unknown"),
    ("Patient.ndjson", lambda r: r.update(birthDate="2999-01-01"),
     "column 'Encounter.period.start': date is before the date of birth"),
    ("Encounter.ndjson", lambda r: r.pop("period"),
     "row 3, column 'Encounter.period.start': must be a full date"),
])
def test_fhir_bad_fields_are_refused_by_file_line_and_field(
        tmp_path: Path, file: str, edit, message: str) -> None:  # noqa: ANN001
    folder = _fhir(tmp_path)
    _edit_line(folder / file, 3, edit)
    with pytest.raises(InputError, match=message) as info:
        read_dataset(folder)
    for value in ("NOPE1", "yesterday", "777", "2999"):
        assert value not in stored_message(info.value)


def test_fhir_not_json_and_mixed_systems(tmp_path: Path) -> None:
    folder = _fhir(tmp_path)
    _edit_line(folder / "Condition.ndjson", 2, lambda r: r["code"]["coding"][0].update(
        system="http://hl7.org/fhir/sid/icd-9-cm", code="250.00"))
    with pytest.raises(InputError, match="extract mixes ICD-9-CM and ICD-10-CM"):
        read_dataset(folder)
    with (folder / "Condition.ndjson").open("a", encoding="utf-8") as out:
        out.write("{not json\n")
    with pytest.raises(InputError, match="row 13|is not a JSON object"):
        read_dataset(folder)


def test_fhir_line_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _fhir(tmp_path)
    monkeypatch.setenv("EHR_RELEASE_MAX_LINE_BYTES", "60")
    with pytest.raises(InputError, match="line 1 is longer than 60 bytes"):
        read_dataset(folder)


def test_mimic4_mixed_versions_and_bad_version(tmp_path: Path) -> None:
    source = numbered(generate_sample(12, seed=2, longitudinal=True, code_system="icd10"))
    folder = WRITERS["mimic4"](source, tmp_path / "hosp")
    _edit_csv(folder / "diagnoses_icd.csv", 5, "icd_version", "9")
    with pytest.raises(InputError, match="row 1, .*extract mixes ICD-9-CM and ICD-10-CM"):
        read_dataset(folder)
    _edit_csv(folder / "diagnoses_icd.csv", 5, "icd_version", "11")
    with pytest.raises(InputError, match="row 5, column 'icd_version': icd_version must be"):
        read_dataset(folder)


def test_compressed_mimic4_is_refused_with_advice(tmp_path: Path) -> None:
    (tmp_path / "patients.csv.gz").write_bytes(b"\x1f\x8b")
    with pytest.raises(InputError, match="decompress them first"):
        read_dataset(tmp_path)
