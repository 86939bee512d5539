"""What the OMOP, FHIR and MIMIC-IV readers share: ages from dates, and one Dataset.

These sources record events by date, not by age, and a patient's birth date more or less
exactly (OMOP: a year, often a month and day; FHIR: ``YYYY``, ``YYYY-MM`` or a full date;
MIMIC-IV: an anchor age in an anchor year). Every reader turns them into the one
:class:`~ehr_release.model.dataset.Dataset` of the CSV readers:

* ``patients``: ``age`` — the age at the patient's first visit (as the MIMIC-III reader
  does), or at the first diagnosis without visits — and ``gender`` (``M``, ``F``, or ``""``
  when not recorded), then what the source adds;
* ``diagnoses``: the code and the age at which it was recorded.

Errors name the file, the row (1-based data row, or the NDJSON line) and the field, and
never quote a value into the stored message (``detail`` is terminal-only).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.core.errors import InputError
from ehr_release.ingest.rules import MAX_AGE
from ehr_release.ingest.validate import read_codes
from ehr_release.model.dataset import AGE, CODE, PATIENT_ID, Dataset


def whole_years(birth_year: np.ndarray, birth_md: np.ndarray, event: pd.Series) -> np.ndarray:
    """Whole years from a birth date to each ``event`` date.

    ``birth_md`` is the birthday as ``month * 100 + day``, or 0 when only the year is
    known: the age is then the difference of the years (the patient is taken to be born on
    1 January — at most one year too old, never younger than recorded events allow).
    """
    ey = event.dt.year.to_numpy()
    emd = event.dt.month.to_numpy() * 100 + event.dt.day.to_numpy()
    return ey - birth_year - ((birth_md > 0) & (emd < birth_md)).astype(int)


def check_ages(ages: np.ndarray, rows: np.ndarray, path: Path, field: str) -> None:
    """Refuse the first event dated before the birth date, then the first age over
    :data:`~ehr_release.ingest.rules.MAX_AGE` (a wrong birth year), by row and field."""
    for bad, problem in ((ages < 0, "date is before the date of birth"),
                         (ages > MAX_AGE, f"age at this date is over {MAX_AGE}: is the "
                                          "birth date right?")):
        if bad.any():
            raise InputError(problem, file=str(path), row=int(rows[int(bad.argmax())]),
                             column=field)


def unknown_patient(ids: pd.Series, known: set[str], rows: np.ndarray, path: Path,
                    field: str) -> None:
    """Refuse the first reference to a patient the patient table does not hold."""
    unknown = ~ids.isin(known).to_numpy()
    if unknown.any():
        raise InputError("patient id is not in the patients table", file=str(path),
                         row=int(rows[int(unknown.argmax())]), column=field)


def assemble(patients: pd.DataFrame, diagnoses: pd.DataFrame, *, code_path: Path,
             code_field: str, code_system: str | None, source: str,
             class_column: str | None = None, code_mapping: str | None = None,
             icd9: pd.Series | None = None) -> Dataset:
    """The Dataset of ``patients`` (indexed by id; ``gender`` and what else the source has)
    and ``diagnoses`` (``patient_id``, raw ``code``, ``age``, source ``row``).

    Codes are validated and dotted here (one code system per extract, detected unless
    declared; or ICD-9-CM mapped to ICD-10-CM with ``code_mapping``, ``icd9`` marking the
    rows the source declares ICD-9-CM); each patient's ``age`` is the age at
    ``first_visit_age`` when the source gave one, else at the first diagnosis.
    """
    diagnoses = diagnoses.reset_index(drop=True)
    codes, system, losses = read_codes(diagnoses[CODE], diagnoses["row"], code_path,
                                       code_field, code_system, code_mapping, icd9)
    first_dx = diagnoses.groupby(PATIENT_ID)[AGE].min()  # ages before any code is dropped
    if losses is not None:  # drop what the mapping could not map
        keep = codes.notna().to_numpy()
        diagnoses, codes = (diagnoses[keep].reset_index(drop=True),
                            codes[keep].reset_index(drop=True))
    out = patients.copy()
    visit_age = out.pop("first_visit_age") if "first_visit_age" in out else None
    age = first_dx.reindex(out.index)
    if visit_age is not None:
        age = visit_age.where(visit_age.notna(), age)
    out.insert(0, "age", pd.array(age.to_numpy(dtype=object), dtype="Int64"))
    out.index.name = PATIENT_ID
    diag = pd.DataFrame({PATIENT_ID: diagnoses[PATIENT_ID].to_numpy(dtype=object),
                         CODE: codes.to_numpy(),
                         AGE: pd.array(diagnoses[AGE].to_numpy(dtype=object),
                                       dtype="Int64")})
    return Dataset(out, diag, class_column=class_column, source=source, code_system=system,
                   code_mapping=losses)
