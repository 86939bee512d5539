"""Readers: every accepted shape loads; every bad input names file, row and column."""

from pathlib import Path

import pandas as pd
import pytest

from ehr_release.core.errors import InputError
from ehr_release.ingest import read_dataset


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_wide_csv_with_spaces_semicolons_and_ages(tmp_path):
    f = write(tmp_path / "p.csv", "patient_id,age,gender,codes\n"
                                  "a,50,F,4019 250.00;2720\n"
                                  "b,61,M,296.01@40;296.01@44\n")
    ds = read_dataset(f)
    assert ds.patient_ids == ["a", "b"]
    assert ds.code_sets()[0] == frozenset({"401.9", "250.00", "272.0"})
    assert ds.trajectories()[1] == [("296.01", 40), ("296.01", 44)]
    assert ds.patients["age"].tolist() == [50, 61]


def test_parquet_round_trip(tmp_path):
    frame = pd.DataFrame({"patient_id": ["a", "b"], "gender": ["F", "M"],
                          "codes": ["401.9", "250 272"]})
    frame.to_parquet(tmp_path / "p.parquet")
    ds = read_dataset(tmp_path / "p.parquet")
    assert ds.code_sets()[1] == frozenset({"250", "272"})


def test_long_tables_with_admission_ages(tmp_path):
    pats = write(tmp_path / "patients.csv", "patient_id,gender,birth_date\n"
                                            "a,F,1950-06-01\nb,M,3/5/94 0:00\n")
    adm = write(tmp_path / "adm.csv", "admission,patient_id,admit_date\n"
                                      "1,a,2000-05-31\n2,a,2000-06-01\n3,b,10/23/64 21:09\n")
    diag = write(tmp_path / "diag.csv", "patient_id,code,admission\n"
                                        "a,4019,1\na,4019,2\nb,25000,3\n")
    ds = read_dataset(pats, diag, admissions_path=adm)
    assert ds.trajectories() == [[("401.9", 49), ("401.9", 50)], [("250.00", 70)]]
    assert "birth_date" not in ds.patients.columns


def test_mimic_demo_folder(shared_data):
    ds = read_dataset(shared_data / "mimic3-demo")
    assert ds.n_patients == 100
    assert len(ds.diagnoses) == 1761
    assert ds.class_column == "in_hospital_death"
    ages = ds.diagnoses["age"]
    assert ages.min() == 17 and ages.max() == 90
    assert set(ds.demographic_columns) >= {"age", "gender", "ethnicity", "insurance"}


@pytest.mark.parametrize("name, content, fragments", [
    ("p.csv", "patient_id,age,codes\na,50,401.9\na,51,250\n",
     ["row 2", "'patient_id'", "duplicate patient id (same as row 1)"]),
    ("p.csv", "patient_id,age,codes\na,50,401.9\nb,51,ZZZ.9\n",
     ["row 2", "'codes'", "malformed ICD-9 code", "(found 'ZZZ.9')"]),
    ("p.csv", "patient_id,age,codes\na,fifty,401.9\n",
     ["row 1", "'age'", "age is not a number", "(found 'fifty')"]),
    ("p.csv", "patient_id,age\na,50\n", ["column 'codes'", "required column is missing"]),
    ("p.csv", "patient_id,age,codes\n", ["dataset is empty"]),
    ("p.csv", "", ["file is empty"]),
    ("p.xlsx", "whatever", ["unknown format '.xlsx'"]),
    ("p.csv", "patient_id,codes\na,401.9@abc\n", ["row 1", "age is not a number", "(found 'abc')"]),
])
def test_bad_input_is_named(tmp_path, name, content, fragments):
    f = write(tmp_path / name, content)
    with pytest.raises(InputError) as err:
        read_dataset(f)
    message = str(err.value)
    assert str(f) in message
    for fragment in fragments:
        assert fragment in message


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="file does not exist"):
        read_dataset(tmp_path / "nope.csv")


def test_diagnosis_for_unknown_patient(tmp_path):
    pats = write(tmp_path / "patients.csv", "patient_id,gender\na,F\n")
    diag = write(tmp_path / "diag.csv", "patient_id,code\na,4019\nzz,250\n")
    with pytest.raises(InputError,
                       match=r"row 2, column 'patient_id': patient id is not in the patients"):
        read_dataset(pats, diag)


def test_corrupt_parquet(tmp_path):
    f = write(tmp_path / "p.parquet", "not parquet at all")
    with pytest.raises(InputError, match="cannot be parsed"):
        read_dataset(f)


def test_patients_without_codes_load_with_empty_records(tmp_path):
    f = write(tmp_path / "p.csv", "patient_id,age,codes\np1,40,\np2,50,401.9\n")
    ds = read_dataset(f)
    assert ds.code_sets() == [frozenset(), frozenset({"401.9"})]
    only_demographics = read_dataset(write(tmp_path / "q.csv", "patient_id,age,codes\np1,40,\n"))
    assert only_demographics.n_patients == 1 and len(only_demographics.diagnoses) == 0


def test_text_that_is_not_utf8_is_refused_naming_its_line(tmp_path):
    """Not a byte offset into pandas' buffer: the line a steward can open; the stored
    message keeps it (a line number quotes nothing), the byte itself is not shown."""
    f = tmp_path / "latin1.csv"
    f.write_bytes(b"patient_id,gender,codes\na,F,401.9\nb,M,250\nc,\xc9lise,401.9\n")
    with pytest.raises(InputError) as caught:
        read_dataset(f)
    assert caught.value.public() == (f"file {f}: line 4 is not UTF-8 text (save the file "
                                     "as UTF-8)")


def test_a_row_longer_than_the_header_is_refused_naming_its_line_in_the_stored_message(
        tmp_path):
    f = tmp_path / "long.csv"
    f.write_text("patient_id,gender,codes\na,F,401.9\nb,M,250,Q99\n")
    with pytest.raises(InputError) as caught:
        read_dataset(f)
    assert caught.value.public() == (f"file {f}: cannot be parsed: line 3 has 4 fields where "
                                     "the header has 3")
    assert "Q99" not in str(caught.value)
