"""OMOP Common Data Model v5.4 folders: ``person``, ``condition_occurrence`` and, when
present, ``visit_occurrence`` and ``death`` (CSV or Parquet, any letter case).

What is read, and why:

* diagnosis codes from ``condition_source_value`` — the code as the hospital recorded it
  (ICD-10-CM in US data since 2015, ICD-9-CM before), not ``condition_concept_id``, whose
  SNOMED concepts are a different hierarchy; a row without a source code is refused;
* the age at each diagnosis from the birth date (``year_of_birth``, with ``month_of_birth``
  and ``day_of_birth`` when given) and ``condition_start_date``;
* each patient's ``age`` at the first ``visit_start_date`` (else at the first diagnosis),
  ``gender`` from ``gender_concept_id`` (8507 → ``M``, 8532 → ``F``, other → ``""``), and,
  with a ``death`` table, the class column ``died`` (0/1).

``observation_period`` is accepted and not read: the release needs no follow-up time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.core.errors import InputError
from ehr_release.ingest.clinical import assemble, check_ages, unknown_patient, whole_years
from ehr_release.ingest.dates import parse_dates
from ehr_release.ingest.tables import read_table, require_columns, require_rows
from ehr_release.ingest.validate import check_unique_ids
from ehr_release.model.dataset import AGE, CODE, PATIENT_ID, Dataset

TABLES = ("person", "condition_occurrence")
OPTIONAL = ("visit_occurrence", "death", "observation_period")
GENDER = {"8507": "M", "8532": "F"}
DIED = "died"
PERSON = "person_id"


def read_omop(folder: Path, files: dict[str, Path], *, class_column: str | None = None,
              code_system: str | None = None, code_mapping: str | None = None) -> Dataset:
    """Read an OMOP CDM folder (``files``: table name → file) into a Dataset."""
    p_path, c_path = files["person"], files["condition_occurrence"]
    person = read_table(p_path)
    require_columns(person, [PERSON, "gender_concept_id", "year_of_birth"], p_path)
    require_rows(person, p_path)
    check_unique_ids(person[PERSON], p_path, PERSON)
    ids = person[PERSON].to_numpy(dtype=object)
    birth_year, birth_md = _births(person, p_path)
    born = pd.DataFrame({"y": birth_year, "md": birth_md}, index=ids)

    cond = read_table(c_path)
    require_columns(cond, [PERSON, "condition_start_date", "condition_source_value"], c_path)
    require_rows(cond, c_path)
    rows = np.arange(1, len(cond) + 1)
    unknown_patient(cond[PERSON], set(ids), rows, c_path, PERSON)
    dx_age = _ages(cond, "condition_start_date", born, rows, c_path)
    diagnoses = pd.DataFrame({PATIENT_ID: cond[PERSON], CODE: cond["condition_source_value"],
                              AGE: dx_age, "row": rows})

    patients = pd.DataFrame(index=pd.Index(ids, name=PATIENT_ID))
    if "visit_occurrence" in files:
        v_path = files["visit_occurrence"]
        visits = read_table(v_path)
        require_columns(visits, [PERSON, "visit_start_date"], v_path)
        v_rows = np.arange(1, len(visits) + 1)
        unknown_patient(visits[PERSON], set(ids), v_rows, v_path, PERSON)
        v_age = pd.Series(_ages(visits, "visit_start_date", born, v_rows, v_path),
                          index=visits[PERSON].to_numpy())
        patients["first_visit_age"] = v_age.groupby(level=0).min().reindex(ids).to_numpy()
    patients["gender"] = [GENDER.get(g, "") for g in person["gender_concept_id"]]
    if "death" in files:
        d_path = files["death"]
        death = read_table(d_path)
        require_columns(death, [PERSON], d_path)
        unknown_patient(death[PERSON], set(ids), np.arange(1, len(death) + 1), d_path, PERSON)
        patients[DIED] = np.isin(ids, death[PERSON].to_numpy()).astype(int)
    if class_column is not None and class_column not in patients.columns:
        raise InputError("class column is missing", file=str(p_path), column=class_column)
    return assemble(patients, diagnoses, code_path=c_path, code_field="condition_source_value",
                    code_system=code_system, source=str(folder), code_mapping=code_mapping,
                    class_column=class_column or (DIED if "death" in files else None))


def _births(person: pd.DataFrame, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Birth years and birthdays (month * 100 + day, 0 when not both given), checked."""
    out = []
    for field, low, high in (("year_of_birth", 1800, 2200), ("month_of_birth", 1, 12),
                             ("day_of_birth", 1, 31)):
        raw = person[field] if field in person.columns else pd.Series([""] * len(person))
        values = pd.to_numeric(raw.where(raw.ne(""), None), errors="coerce")
        bad = (raw.ne("") & (values.isna() | (values < low) | (values > high)
                             | (values % 1 != 0))).to_numpy()
        if field == "year_of_birth":
            bad |= raw.eq("").to_numpy()
        if bad.any():
            raise InputError(f"{field.replace('_', ' ')} must be a whole number from {low} "
                             f"to {high}", file=str(path), row=int(bad.argmax()) + 1,
                             column=field)
        out.append(values.fillna(0).to_numpy(dtype=int))
    year, month, day = out
    return year, np.where((month > 0) & (day > 0), month * 100 + day, 0)


def _ages(table: pd.DataFrame, field: str, born: pd.DataFrame, rows: np.ndarray,
          path: Path) -> np.ndarray:
    dates, _ = parse_dates(table[field], path, field)
    missing = table[field].eq("").to_numpy()
    if missing.any():
        raise InputError("date is empty", file=str(path), row=int(rows[missing.argmax()]),
                         column=field)
    b = born.loc[table[PERSON].to_numpy()]
    ages = whole_years(b["y"].to_numpy(), b["md"].to_numpy(), dates.reset_index(drop=True))
    check_ages(ages, rows, path, field)
    return ages
