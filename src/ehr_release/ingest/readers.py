"""Readers for the three input shapes we accept.

1. **Wide**: one row per patient, a ``patient_id`` column, demographic columns and a
   ``codes`` column (codes separated by spaces or ``;``; a code may carry an age at
   diagnosis as ``401.9@63``).
2. **Long**: a patients table (``patient_id`` + demographics, optionally ``birth_date``)
   plus a diagnoses table (``patient_id, code[, admission][, age]``) and optionally an
   admissions table (``admission, patient_id, admit_date``) from which ages are computed.
3. **MIMIC-III directory**: a folder holding ``PATIENTS``, ``ADMISSIONS`` and
   ``DIAGNOSES_ICD`` tables, read as (2) with MIMIC's column names and date conventions.
4. **MIMIC-IV ``hosp``, OMOP CDM v5.4 and FHIR R4 bulk-export folders**, told apart by
   :mod:`ehr_release.ingest.layouts` and read by their own modules.

Every reader validates once, here, and raises :class:`InputError` naming file, row, column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.dataset import AGE, CODE, PATIENT_ID, Dataset
from ehr_release.errors import InputError
from ehr_release.ingest.dates import ages_at, parse_dates
from ehr_release.ingest.rules import CODE_SEPARATOR
from ehr_release.ingest.tables import read_table, require_columns, require_rows
from ehr_release.ingest.validate import check_unique_ids, parse_ages, read_codes

CODES = "codes"
#: Columns that identify or date a patient directly; never treated as demographics.
NON_DEMOGRAPHIC = {"row_id", "birth_date", "dod", "dod_hosp", "dod_ssn", "expire_flag",
                   "admission", "admit_date"}
MIMIC_TABLES = ("patients", "admissions", "diagnoses_icd")
MIMIC_DEMOGRAPHICS = ["insurance", "religion", "marital_status", "ethnicity",
                      "admission_type", "admission_location"]
MIMIC_CLASS = "in_hospital_death"


def read_dataset(
    input_path: str | Path,
    diagnoses_path: str | Path | None = None,
    *,
    admissions_path: str | Path | None = None,
    class_column: str | None = None,
    code_system: str | None = None,
    code_mapping: str | None = None,
) -> Dataset:
    """Read any accepted input shape into a :class:`Dataset` (see module docstring).

    ``code_system`` (``icd9`` or ``icd10``) declares the extract's codes; None detects it
    (:func:`~ehr_release.ingest.rules.detect_code_system`). ``code_mapping`` ``gem`` maps
    ICD-9-CM codes to ICD-10-CM instead of refusing a mix (:mod:`ehr_release.ingest.gem`).
    """
    path = Path(input_path)
    if path.is_dir():
        from ehr_release.ingest.layouts import read_folder

        return read_folder(path, class_column=class_column, code_system=code_system,
                           code_mapping=code_mapping)
    if diagnoses_path is not None:
        return read_long(path, Path(diagnoses_path),
                         admissions_path=Path(admissions_path) if admissions_path else None,
                         class_column=class_column, code_system=code_system,
                         code_mapping=code_mapping)
    return read_wide(path, class_column=class_column, code_system=code_system,
                     code_mapping=code_mapping)


def read_wide(path: Path, *, class_column: str | None = None,
              code_system: str | None = None, code_mapping: str | None = None) -> Dataset:
    """One row per patient with a ``codes`` column."""
    frame = read_table(path)
    require_columns(frame, [PATIENT_ID, CODES], path)
    require_rows(frame, path)
    check_unique_ids(frame[PATIENT_ID], path)
    patients = _demographics(frame.drop(columns=[CODES]), path, class_column)

    tokens = frame[CODES].str.split(CODE_SEPARATOR.pattern, regex=True)
    exploded = pd.DataFrame({PATIENT_ID: frame[PATIENT_ID], "tok": tokens,
                             "row": np.arange(1, len(frame) + 1)}).explode("tok")
    exploded = exploded[exploded["tok"].notna() & exploded["tok"].ne("")]
    # Patients may have no codes at all (e.g. a demographics-only extract): the column
    # accessors below would find no columns to index on an empty frame.
    tok = exploded["tok"].astype("string")
    code_txt = tok.str.partition("@")[0] if len(tok) else tok
    age_txt = tok.str.partition("@")[2] if len(tok) else tok
    rows = exploded["row"]
    codes, system, losses = read_codes(code_txt.fillna(""), rows, path, CODES, code_system,
                                       code_mapping)
    ages = parse_ages(age_txt.fillna(""), rows, path, CODES)
    diagnoses = pd.DataFrame({PATIENT_ID: exploded[PATIENT_ID].to_numpy(),
                              CODE: codes.to_numpy(), AGE: ages.to_numpy()})
    return Dataset(patients, _mapped(diagnoses), class_column=class_column, source=str(path),
                   code_system=system, code_mapping=losses)


def read_long(path: Path, diagnoses_path: Path, *, admissions_path: Path | None = None,
              class_column: str | None = None, code_system: str | None = None,
              code_mapping: str | None = None) -> Dataset:
    """A patients table plus a long diagnoses table (and optionally admissions)."""
    pats = read_table(path)
    require_columns(pats, [PATIENT_ID], path)
    require_rows(pats, path)
    check_unique_ids(pats[PATIENT_ID], path)
    diag = read_table(diagnoses_path)
    require_columns(diag, [PATIENT_ID, CODE], diagnoses_path)
    ages = _diagnosis_ages(pats, path, diag, diagnoses_path, admissions_path)
    patients = _demographics(pats, path, class_column)
    diagnoses, system, losses = _diagnoses(diag, diagnoses_path, patients, ages, code_system,
                                           code_mapping)
    return Dataset(patients, diagnoses, class_column=class_column,
                   source=f"{path} + {diagnoses_path}", code_system=system,
                   code_mapping=losses)


def read_mimic_dir(folder: Path, *, class_column: str | None = None,
                   code_system: str | None = None, code_mapping: str | None = None) -> Dataset:
    """A MIMIC-III (demo) folder: one row per patient, demographics of the first admission,
    class = died in hospital during any admission, codes aged at their admission."""
    files = {p.stem.lower(): p for p in folder.iterdir()
             if p.suffix.lower() in {".csv", ".parquet"}}
    missing = [t for t in MIMIC_TABLES if t not in files]
    if missing:
        raise InputError(f"MIMIC folder lacks the {missing[0].upper()} table", file=str(folder))
    p_path, a_path, d_path = (files[t] for t in MIMIC_TABLES)
    pats = read_table(p_path)
    require_columns(pats, [PATIENT_ID, "gender", "birth_date"], p_path)
    require_rows(pats, p_path)
    check_unique_ids(pats[PATIENT_ID], p_path)
    adm = read_table(a_path)
    require_columns(adm, ["admission", PATIENT_ID, "admit_date", "hospital_expire_flag",
                          *MIMIC_DEMOGRAPHICS], a_path)
    _check_known_patients(adm[PATIENT_ID], pats[PATIENT_ID], a_path)
    adm_age = _admission_ages(pats, p_path, adm, a_path)
    adm = adm.assign(age=adm_age, _t=parse_dates(adm["admit_date"], a_path, "admit_date")[0])
    first = adm.sort_values("_t").drop_duplicates(PATIENT_ID).set_index(PATIENT_ID)
    died = adm.groupby(PATIENT_ID)["hospital_expire_flag"].apply(lambda s: int((s == "1").any()))
    out = pd.DataFrame(index=pd.Index(pats[PATIENT_ID], name=PATIENT_ID))
    out["age"] = first["age"].reindex(out.index).astype("Int64")
    out["gender"] = pats.set_index(PATIENT_ID)["gender"].reindex(out.index)
    for col in MIMIC_DEMOGRAPHICS:
        out[col] = first[col].reindex(out.index)
    out[MIMIC_CLASS] = died.reindex(out.index).fillna(0).astype(int)
    diag = read_table(d_path)
    require_columns(diag, [PATIENT_ID, CODE, "admission"], d_path)
    diag = diag[diag[CODE] != ""]  # MIMIC leaves a few diagnosis rows without a code
    ages = diag["admission"].map(pd.Series(adm_age, index=adm["admission"].to_numpy()))
    diagnoses, system, losses = _diagnoses(diag, d_path, out, ages.astype("Int64"),
                                           code_system, code_mapping)
    return Dataset(out, diagnoses, class_column=class_column or MIMIC_CLASS,
                   source=str(folder), code_system=system, code_mapping=losses)


# --------------------------------------------------------------------------- helpers
def _demographics(frame: pd.DataFrame, path: Path, class_column: str | None) -> pd.DataFrame:
    if class_column is not None and class_column not in frame.columns:
        raise InputError("class column is missing", file=str(path), column=class_column)
    keep = [c for c in frame.columns if c != PATIENT_ID and c not in NON_DEMOGRAPHIC]
    out = frame[keep].copy()
    out.index = pd.Index(frame[PATIENT_ID].to_numpy(), name=PATIENT_ID)
    if "age" in out.columns:
        rows = pd.Series(np.arange(1, len(frame) + 1))
        out["age"] = parse_ages(frame["age"].reset_index(drop=True), rows, path, "age").to_numpy()
    return out


def _diagnoses(diag: pd.DataFrame, path: Path, patients: pd.DataFrame,
               ages: pd.Series | None, code_system: str | None = None,
               code_mapping: str | None = None) -> tuple[pd.DataFrame, str, str | None]:
    require_rows(diag, path)
    diag = diag.reset_index(drop=True)
    rows = pd.Series(np.arange(1, len(diag) + 1))
    _check_known_patients(diag[PATIENT_ID], pd.Series(patients.index), path)
    codes, system, losses = read_codes(diag[CODE], rows, path, CODE, code_system, code_mapping)
    if ages is None:
        ages = (parse_ages(diag[AGE], rows, path, AGE) if AGE in diag.columns
                else pd.Series(pd.array([None] * len(diag), dtype="Int64")))
    out = pd.DataFrame({PATIENT_ID: diag[PATIENT_ID].to_numpy(), CODE: codes.to_numpy(),
                        AGE: pd.array(np.asarray(ages, dtype=object), dtype="Int64")})
    return _mapped(out), system, losses


def _mapped(diagnoses: pd.DataFrame) -> pd.DataFrame:
    """The diagnoses less those a code mapping dropped (their code is None)."""
    keep = diagnoses[CODE].notna().to_numpy()
    return diagnoses if keep.all() else diagnoses[keep].reset_index(drop=True)


def _check_known_patients(ids: pd.Series, known: pd.Series, path: Path) -> None:
    unknown = ~ids.isin(set(known))
    if unknown.any():
        i = int(unknown.to_numpy().argmax())
        raise InputError("patient id is not in the patients table",
                         file=str(path), row=i + 1, column=PATIENT_ID)


def _admission_ages(pats: pd.DataFrame, p_path: Path, adm: pd.DataFrame,
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


def _diagnosis_ages(pats: pd.DataFrame, p_path: Path, diag: pd.DataFrame, d_path: Path,
                    admissions_path: Path | None) -> pd.Series | None:
    if admissions_path is None or "birth_date" not in pats.columns:
        return None
    adm = read_table(admissions_path)
    require_columns(adm, ["admission", PATIENT_ID, "admit_date"], admissions_path)
    _check_known_patients(adm[PATIENT_ID], pats[PATIENT_ID], admissions_path)
    require_columns(diag, ["admission"], d_path)
    ages = pd.Series(_admission_ages(pats, p_path, adm, admissions_path),
                     index=adm["admission"].to_numpy())
    missing = ~diag["admission"].isin(ages.index)
    if missing.any():
        i = int(missing.to_numpy().argmax())
        raise InputError("admission is not in the admissions table",
                         file=str(d_path), row=i + 1, column="admission")
    return diag["admission"].map(ages).astype("Int64")
