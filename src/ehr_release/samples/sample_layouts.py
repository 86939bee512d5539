"""The same generated patients written as a wide CSV, an OMOP CDM folder, a FHIR bulk
export and a MIMIC-IV ``hosp`` folder — test and demo data for the folder readers.

Nothing is kept as a file in the repository: these writers render any longitudinal
:class:`~ehr_release.model.dataset.Dataset` (usually
:func:`ehr_release.samples.sample.generate_sample`
with ``longitudinal=True``) so that each reader, reading its rendering back, must give the
same patients (``age`` at the first visit, ``gender``) and the same aged diagnoses.

Dates are made from ages by one public rule: a patient is born on 15 March of
``BASE_YEAR − (their first age)`` … shifted by their position so that birth years differ,
and a diagnosis recorded at age ``a`` is dated 1 June of ``birth year + a`` (after the
birthday, so the whole years come out as ``a``). Every distinct diagnosis age is one visit.
Codes are written as each source usually writes them: undotted in OMOP's
``condition_source_value`` and MIMIC-IV's ``icd_code``, dotted in FHIR.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ehr_release.model.dataset import AGE, CODE, PATIENT_ID, Dataset

BASE_YEAR = 1930
FHIR_SYSTEM = {"icd10": "http://hl7.org/fhir/sid/icd-10-cm",
               "icd9": "http://hl7.org/fhir/sid/icd-9-cm"}
OMOP_GENDER = {"M": 8507, "F": 8532}
FHIR_GENDER = {"M": "male", "F": "female"}
LAYOUTS = ("csv", "omop", "fhir", "mimic4")


def numbered(dataset: Dataset, start: int = 1001) -> Dataset:
    """``dataset`` with patient ids ``1001, 1002, …`` (OMOP and MIMIC ids are integers) and
    each patient's ``age`` set to the age at the first diagnosis, the first visit of every
    rendering."""
    mapping = {pid: str(start + i) for i, pid in enumerate(dataset.patient_ids)}
    diagnoses = dataset.diagnoses.assign(**{PATIENT_ID: dataset.diagnoses[PATIENT_ID]
                                            .map(mapping)})
    patients = dataset.patients.rename(index=mapping)
    patients.index.name = PATIENT_ID
    first = diagnoses.groupby(PATIENT_ID)[AGE].min()
    patients["age"] = pd.array(first.reindex(patients.index).to_numpy(dtype=object),
                               dtype="Int64")
    return Dataset(patients, diagnoses, class_column=dataset.class_column,
                   source=dataset.source, code_system=dataset.code_system)


def _births(dataset: Dataset) -> dict[str, int]:
    return {pid: BASE_YEAR + i % 40 for i, pid in enumerate(dataset.patient_ids)}


def _visits(dataset: Dataset) -> pd.DataFrame:
    """One row per (patient, distinct diagnosis age), numbered: the visits/admissions."""
    visits = (dataset.diagnoses[[PATIENT_ID, AGE]].drop_duplicates()
              .sort_values([PATIENT_ID, AGE]).reset_index(drop=True))
    visits["visit"] = [str(50_001 + i) for i in range(len(visits))]
    births = _births(dataset)
    visits["date"] = [f"{births[p] + int(a)}-06-01" for p, a in zip(visits[PATIENT_ID],
                                                                   visits[AGE], strict=True)]
    return visits


def _with_visits(dataset: Dataset) -> pd.DataFrame:
    return dataset.diagnoses.merge(_visits(dataset), on=[PATIENT_ID, AGE], how="left")


def _undotted(code: str) -> str:
    return code.replace(".", "")


def write_csv(dataset: Dataset, path: Path) -> Path:
    """The wide CSV: ``patient_id, age, gender, codes`` with ``code@age`` tokens."""
    tokens = dataset.diagnoses.assign(tok=dataset.diagnoses[CODE] + "@"
                                      + dataset.diagnoses[AGE].astype(str))
    cells = tokens.groupby(PATIENT_ID)["tok"].agg(" ".join)
    frame = pd.DataFrame({PATIENT_ID: dataset.patient_ids,
                          "age": dataset.patients["age"].to_numpy(),
                          "gender": dataset.patients["gender"].to_numpy(),
                          "codes": cells.reindex(dataset.patient_ids).fillna("").to_numpy()})
    frame.to_csv(path, index=False)
    return path


def write_omop(dataset: Dataset, folder: Path) -> Path:
    """``person``, ``visit_occurrence``, ``condition_occurrence`` (and ``death`` for the
    class column's 1s) as OMOP CDM v5.4 CSV tables."""
    folder.mkdir(parents=True, exist_ok=True)
    births = _births(dataset)
    ids = dataset.patient_ids
    pd.DataFrame({"person_id": ids,
                  "gender_concept_id": [OMOP_GENDER.get(g, 0)
                                        for g in dataset.patients["gender"]],
                  "year_of_birth": [births[p] for p in ids], "month_of_birth": 3,
                  "day_of_birth": 15, "race_concept_id": 0, "ethnicity_concept_id": 0}
                 ).to_csv(folder / "person.csv", index=False)
    visits = _visits(dataset)
    pd.DataFrame({"visit_occurrence_id": visits["visit"], "person_id": visits[PATIENT_ID],
                  "visit_concept_id": 9201, "visit_start_date": visits["date"],
                  "visit_end_date": visits["date"], "visit_type_concept_id": 32817}
                 ).to_csv(folder / "visit_occurrence.csv", index=False)
    dx = _with_visits(dataset)
    pd.DataFrame({"condition_occurrence_id": range(1, len(dx) + 1),
                  "person_id": dx[PATIENT_ID], "condition_concept_id": 0,
                  "condition_start_date": dx["date"], "condition_type_concept_id": 32817,
                  "condition_source_value": dx[CODE].map(_undotted),
                  "visit_occurrence_id": dx["visit"]}
                 ).to_csv(folder / "condition_occurrence.csv", index=False)
    return folder


def write_fhir(dataset: Dataset, folder: Path) -> Path:
    """``Patient.ndjson``, ``Encounter.ndjson``, ``Condition.ndjson`` (FHIR R4)."""
    folder.mkdir(parents=True, exist_ok=True)
    births = _births(dataset)
    with (folder / "Patient.ndjson").open("w", encoding="utf-8") as out:
        for pid, gender in zip(dataset.patient_ids, dataset.patients["gender"], strict=True):
            out.write(json.dumps({"resourceType": "Patient", "id": pid,
                                  "gender": FHIR_GENDER.get(gender, "unknown"),
                                  "birthDate": f"{births[pid]}-03-15"}) + "\n")
    with (folder / "Encounter.ndjson").open("w", encoding="utf-8") as out:
        for _, v in _visits(dataset).iterrows():
            out.write(json.dumps({"resourceType": "Encounter", "id": v["visit"],
                                  "status": "finished",
                                  "class": {"code": "IMP"},
                                  "subject": {"reference": f"Patient/{v[PATIENT_ID]}"},
                                  "period": {"start": f"{v['date']}T10:00:00Z"}}) + "\n")
    system = FHIR_SYSTEM[dataset.code_system]
    with (folder / "Condition.ndjson").open("w", encoding="utf-8") as out:
        for i, d in _with_visits(dataset).iterrows():
            out.write(json.dumps({"resourceType": "Condition", "id": f"c{i + 1}",
                                  "subject": {"reference": f"Patient/{d[PATIENT_ID]}"},
                                  "encounter": {"reference": f"Encounter/{d['visit']}"},
                                  "code": {"coding": [{"system": system, "code": d[CODE]}]},
                                  "onsetDateTime": d["date"]}) + "\n")
    return folder


def write_mimic4(dataset: Dataset, folder: Path) -> Path:
    """``patients``, ``admissions``, ``diagnoses_icd`` as MIMIC-IV ``hosp`` CSV tables."""
    folder.mkdir(parents=True, exist_ok=True)
    births = _births(dataset)
    pats = dataset.patients
    ids = dataset.patient_ids
    first = pats["age"].astype(int).to_numpy()
    pd.DataFrame({"subject_id": ids, "gender": pats["gender"].to_numpy(),
                  "anchor_age": first,
                  "anchor_year": [births[p] + a for p, a in zip(ids, first, strict=True)],
                  "anchor_year_group": "2017 - 2019", "dod": ""}
                 ).to_csv(folder / "patients.csv", index=False)
    visits = _visits(dataset)
    died = (pats[dataset.class_column] if dataset.class_column else pd.Series(0, pats.index))
    last = visits.groupby(PATIENT_ID)["visit"].transform("max") == visits["visit"]
    extra = {c: visits[PATIENT_ID].map(pats[c]).to_numpy()
             for c in ("insurance", "marital_status") if c in pats.columns}
    pd.DataFrame({"subject_id": visits[PATIENT_ID], "hadm_id": visits["visit"],
                  "admittime": visits["date"] + " 10:00:00",
                  "dischtime": visits["date"] + " 18:00:00", "admission_type": "EW EMER.",
                  "admission_location": "EMERGENCY ROOM", **extra,
                  "race": visits[PATIENT_ID].map(pats["ethnicity"]).to_numpy()
                  if "ethnicity" in pats.columns else "",
                  "hospital_expire_flag": (visits[PATIENT_ID].map(died).astype(int)
                                           * last.astype(int)).to_numpy()}
                 ).to_csv(folder / "admissions.csv", index=False)
    dx = _with_visits(dataset)
    pd.DataFrame({"subject_id": dx[PATIENT_ID], "hadm_id": dx["visit"],
                  "seq_num": dx.groupby("visit").cumcount() + 1,
                  "icd_code": dx[CODE].map(_undotted),
                  "icd_version": 10 if dataset.code_system == "icd10" else 9}
                 ).to_csv(folder / "diagnoses_icd.csv", index=False)
    return folder


WRITERS = {"csv": write_csv, "omop": write_omop, "fhir": write_fhir, "mimic4": write_mimic4}
