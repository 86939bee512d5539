"""MIMIC-IV ``hosp`` folders: ``patients``, ``admissions`` and ``diagnoses_icd`` (v2.x/v3.x).

MIMIC-IV gives no birth date: each patient has an ``anchor_age`` in an ``anchor_year``
(both shifted together), so the age at an admission is ``anchor_age + (admission year −
anchor_year)``, top-coded at 91 as MIMIC-IV's own ``anchor_age`` is. ``diagnoses_icd`` says
per row which system its ``icd_code`` is in (``icd_version`` 9 or 10): real MIMIC-IV holds
both (coding changed in 2015), so an extract is refused unless all its rows are in one —
select the ICD-9 or ICD-10 admissions first — or the request maps the ICD-9 rows to
ICD-10-CM with the CMS GEMs (``code_mapping: gem``, :mod:`ehr_release.ingest.gem`).

Patients: ``age`` at the first admission, ``gender``, the first admission's ``insurance``,
``marital_status``, ``race``, ``admission_type``, ``admission_location`` when present, and
the class column ``in_hospital_death`` (``hospital_expire_flag`` of any admission).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.core.errors import InputError
from ehr_release.ingest.clinical import assemble, unknown_patient
from ehr_release.ingest.dates import parse_dates
from ehr_release.ingest.rules import mixed_error
from ehr_release.ingest.tables import read_table, require_columns, require_rows
from ehr_release.ingest.validate import check_unique_ids
from ehr_release.model.dataset import AGE, CODE, PATIENT_ID, Dataset

TABLES = ("patients", "admissions", "diagnoses_icd")
DEMOGRAPHICS = ("insurance", "marital_status", "race", "admission_type", "admission_location")
CLASS = "in_hospital_death"
TOP_AGE = 91
VERSIONS = {"9": "icd9", "10": "icd10"}


def is_mimic4(diagnoses_path: Path) -> bool:
    """A ``diagnoses_icd`` table with an ``icd_version`` column is MIMIC-IV's (MIMIC-III has
    ``icd9_code`` only); read from the header alone."""
    import pyarrow.parquet as pq

    if diagnoses_path.suffix.lower() in {".parquet", ".pq"}:
        names = pq.read_schema(diagnoses_path).names
    else:
        with diagnoses_path.open(encoding="utf-8-sig", errors="replace") as handle:
            names = handle.readline().split(",")
    return "icd_version" in {n.strip().strip('"').lower() for n in names}


def read_mimic4(folder: Path, files: dict[str, Path], *, class_column: str | None = None,
                code_system: str | None = None, code_mapping: str | None = None) -> Dataset:
    p_path, a_path, d_path = (files[t] for t in TABLES)
    pats = read_table(p_path)
    require_columns(pats, [PATIENT_ID, "gender", "anchor_age", "anchor_year"], p_path)
    require_rows(pats, p_path)
    check_unique_ids(pats[PATIENT_ID], p_path, "subject_id")
    ids = pats[PATIENT_ID].to_numpy(dtype=object)
    anchor = pd.DataFrame({"age": _whole(pats, "anchor_age", p_path, 0, TOP_AGE),
                           "year": _whole(pats, "anchor_year", p_path, 1800, 2300)}, index=ids)

    adm = read_table(a_path)
    require_columns(adm, [PATIENT_ID, "admission", "admit_date"], a_path)
    require_rows(adm, a_path)
    a_rows = np.arange(1, len(adm) + 1)
    unknown_patient(adm[PATIENT_ID], set(ids), a_rows, a_path, "subject_id")
    when, _ = parse_dates(adm["admit_date"], a_path, "admittime")
    a = anchor.loc[adm[PATIENT_ID].to_numpy()]
    adm_age = np.minimum(a["age"].to_numpy() + when.dt.year.to_numpy() - a["year"].to_numpy(),
                         TOP_AGE)
    if (adm_age < 0).any():
        raise InputError("admission is before the patient's birth (anchor_year − anchor_age)",
                         file=str(a_path), row=int((adm_age < 0).argmax()) + 1,
                         column="admittime")
    adm = adm.assign(age=adm_age, _t=when.to_numpy(), _row=a_rows)
    first = adm.sort_values(["_t", "_row"]).drop_duplicates(PATIENT_ID).set_index(PATIENT_ID)

    patients = pd.DataFrame(index=pd.Index(ids, name=PATIENT_ID))
    patients["first_visit_age"] = first["age"].reindex(ids).to_numpy()
    patients["gender"] = pats["gender"].to_numpy(dtype=object)
    for col in DEMOGRAPHICS:
        if col in adm.columns:
            patients[col] = first[col].reindex(ids).fillna("").to_numpy(dtype=object)
    if "hospital_expire_flag" in adm.columns:
        died = adm.groupby(PATIENT_ID)["hospital_expire_flag"].apply(lambda s: (s == "1").any())
        patients[CLASS] = died.reindex(ids).fillna(False).astype(int).to_numpy()
    if class_column is not None and class_column not in patients.columns:
        raise InputError("class column is missing", file=str(a_path), column=class_column)

    diag = read_table(d_path)
    require_columns(diag, [PATIENT_ID, "admission", CODE, "icd_version"], d_path)
    require_rows(diag, d_path)
    d_rows = np.arange(1, len(diag) + 1)
    unknown_patient(diag[PATIENT_ID], set(ids), d_rows, d_path, "subject_id")
    ages = pd.Series(adm_age, index=adm["admission"].to_numpy())
    missing = ~diag["admission"].isin(ages.index).to_numpy()
    if missing.any():
        raise InputError("admission is not in the admissions table", file=str(d_path),
                         row=int(missing.argmax()) + 1, column="hadm_id")
    system = (_version(diag, d_path, code_system) if code_mapping is None
              else _checked_versions(diag, d_path))
    diagnoses = pd.DataFrame({PATIENT_ID: diag[PATIENT_ID], CODE: diag[CODE],
                              AGE: diag["admission"].map(ages).to_numpy(), "row": d_rows})
    return assemble(patients, diagnoses, code_path=d_path, code_field="icd_code",
                    code_system=system, source=str(folder), code_mapping=code_mapping,
                    icd9=None if code_mapping is None else diag["icd_version"].eq("9"),
                    class_column=class_column or (CLASS if CLASS in patients else None))


def _checked_versions(diag: pd.DataFrame, path: Path) -> str:
    """Refuse an ``icd_version`` other than 9 or 10; the mapped extract is ICD-10-CM."""
    bad = ~diag["icd_version"].isin(VERSIONS).to_numpy()
    if bad.any():
        raise InputError("icd_version must be 9 or 10", file=str(path),
                         row=int(bad.argmax()) + 1, column="icd_version")
    return "icd10"


def _version(diag: pd.DataFrame, path: Path, declared: str | None) -> str:
    """The one code system ``icd_version`` names for every row (a mix refused by row)."""
    _checked_versions(diag, path)
    version = diag["icd_version"]
    if version.nunique() > 1:
        nine, ten = (int((version == v).to_numpy().argmax()) + 1 for v in ("9", "10"))
        raise mixed_error(path, nine, ten, "icd_version")
    system = VERSIONS[version.iloc[0]]
    if declared is not None and declared != system:
        raise InputError(f"icd_version says {system} but {declared} was declared",
                         file=str(path), row=1, column="icd_version")
    return system


def _whole(table: pd.DataFrame, field: str, path: Path, low: int, high: int) -> np.ndarray:
    values = pd.to_numeric(table[field], errors="coerce")
    bad = (values.isna() | (values < low) | (values > high) | (values % 1 != 0)).to_numpy()
    if bad.any():
        raise InputError(f"{field} must be a whole number from {low} to {high}",
                         file=str(path), row=int(bad.argmax()) + 1, column=field)
    return values.to_numpy(dtype=int)
