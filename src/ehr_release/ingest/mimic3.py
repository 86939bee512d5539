"""The MIMIC-III folder reader: ``PATIENTS``, ``ADMISSIONS`` and ``DIAGNOSES_ICD`` read as long
tables with MIMIC's column names and date conventions (told apart from other folders by
:mod:`ehr_release.ingest.layouts`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ehr_release.core.errors import InputError
from ehr_release.ingest.dates import parse_dates
from ehr_release.ingest.frames import admission_ages, check_known_patients, diagnosis_frame
from ehr_release.ingest.tables import read_table, require_columns, require_rows
from ehr_release.ingest.validate import check_unique_ids
from ehr_release.model.dataset import CODE, PATIENT_ID, Dataset

MIMIC_TABLES = ("patients", "admissions", "diagnoses_icd")
MIMIC_DEMOGRAPHICS = ["insurance", "religion", "marital_status", "ethnicity",
                      "admission_type", "admission_location"]
MIMIC_CLASS = "in_hospital_death"


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
    check_known_patients(adm[PATIENT_ID], pats[PATIENT_ID], a_path)
    adm_age = admission_ages(pats, p_path, adm, a_path)
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
    diagnoses, system, losses = diagnosis_frame(diag, d_path, out, ages.astype("Int64"),
                                                code_system, code_mapping)
    return Dataset(out, diagnoses, class_column=class_column or MIMIC_CLASS,
                   source=str(folder), code_system=system, code_mapping=losses)
