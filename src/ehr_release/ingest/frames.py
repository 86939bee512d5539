"""Turning read tables into the :class:`Dataset`'s frames, with the checks every reader shares.

Demographics, diagnoses and ages at diagnosis are built and validated the same way whether a
wide file, long tables or a MIMIC-III folder was read (:mod:`ehr_release.ingest.readers`,
:mod:`ehr_release.ingest.mimic3`); errors name file, row and column, never a value.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.core.errors import InputError
from ehr_release.ingest.dates import ages_at, parse_dates
from ehr_release.ingest.tables import read_table, require_columns, require_rows
from ehr_release.ingest.validate import parse_ages, read_codes
from ehr_release.model.dataset import AGE, CODE, PATIENT_ID

#: Columns that identify or date a patient directly; never treated as demographics.
NON_DEMOGRAPHIC = {"row_id", "birth_date", "dod", "dod_hosp", "dod_ssn", "expire_flag",
                   "admission", "admit_date"}


def demographic_frame(frame: pd.DataFrame, path: Path, class_column: str | None) -> pd.DataFrame:
    if class_column is not None and class_column not in frame.columns:
        raise InputError("class column is missing", file=str(path), column=class_column)
    keep = [c for c in frame.columns if c != PATIENT_ID and c not in NON_DEMOGRAPHIC]
    out = frame[keep].copy()
    out.index = pd.Index(frame[PATIENT_ID].to_numpy(), name=PATIENT_ID)
    if "age" in out.columns:
        rows = pd.Series(np.arange(1, len(frame) + 1))
        out["age"] = parse_ages(frame["age"].reset_index(drop=True), rows, path, "age").to_numpy()
    return out


def diagnosis_frame(diag: pd.DataFrame, path: Path, patients: pd.DataFrame,
                    ages: pd.Series | None, code_system: str | None = None,
                    code_mapping: str | None = None) -> tuple[pd.DataFrame, str, str | None]:
    require_rows(diag, path)
    diag = diag.reset_index(drop=True)
    rows = pd.Series(np.arange(1, len(diag) + 1))
    check_known_patients(diag[PATIENT_ID], pd.Series(patients.index), path)
    codes, system, losses = read_codes(diag[CODE], rows, path, CODE, code_system, code_mapping)
    if ages is None:
        ages = (parse_ages(diag[AGE], rows, path, AGE) if AGE in diag.columns
                else pd.Series(pd.array([None] * len(diag), dtype="Int64")))
    out = pd.DataFrame({PATIENT_ID: diag[PATIENT_ID].to_numpy(), CODE: codes.to_numpy(),
                        AGE: pd.array(np.asarray(ages, dtype=object), dtype="Int64")})
    return mapped(out), system, losses


def mapped(diagnoses: pd.DataFrame) -> pd.DataFrame:
    """The diagnoses less those a code mapping dropped (their code is None)."""
    keep = diagnoses[CODE].notna().to_numpy()
    return diagnoses if keep.all() else diagnoses[keep].reset_index(drop=True)


def check_known_patients(ids: pd.Series, known: pd.Series, path: Path) -> None:
    unknown = ~ids.isin(set(known))
    if unknown.any():
        i = int(unknown.to_numpy().argmax())
        raise InputError("patient id is not in the patients table",
                         file=str(path), row=i + 1, column=PATIENT_ID)


def admission_ages(pats: pd.DataFrame, p_path: Path, adm: pd.DataFrame,
                    a_path: Path) -> np.ndarray:
    birth, birth_short = parse_dates(pats["birth_date"], p_path, "birth_date")
    by_patient = pd.DataFrame({"b": birth.to_numpy(), "s": birth_short},
                              index=pats[PATIENT_ID].to_numpy())
    event, event_short = parse_dates(adm["admit_date"], a_path, "admit_date")
    b = by_patient.loc[adm[PATIENT_ID].to_numpy()]
    ages = ages_at(pd.Series(b["b"].to_numpy()), b["s"].to_numpy(bool),
                   pd.Series(event.to_numpy()), event_short)
    negative = ages < 0
    if negative.any():
        i = int(negative.argmax())
        raise InputError("admission date is before the date of birth", file=str(a_path),
                         row=i + 1, column="admit_date")
    return ages


def diagnosis_ages(pats: pd.DataFrame, p_path: Path, diag: pd.DataFrame, d_path: Path,
                    admissions_path: Path | None) -> pd.Series | None:
    if admissions_path is None or "birth_date" not in pats.columns:
        return None
    adm = read_table(admissions_path)
    require_columns(adm, ["admission", PATIENT_ID, "admit_date"], admissions_path)
    check_known_patients(adm[PATIENT_ID], pats[PATIENT_ID], admissions_path)
    require_columns(diag, ["admission"], d_path)
    ages = pd.Series(admission_ages(pats, p_path, adm, admissions_path),
                     index=adm["admission"].to_numpy())
    missing = ~diag["admission"].isin(ages.index)
    if missing.any():
        i = int(missing.to_numpy().argmax())
        raise InputError("admission is not in the admissions table",
                         file=str(d_path), row=i + 1, column="admission")
    return diag["admission"].map(ages).astype("Int64")
