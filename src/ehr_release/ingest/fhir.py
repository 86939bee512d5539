"""FHIR R4 bulk-export folders: ``Patient``, ``Condition`` and ``Encounter`` NDJSON files.

Every ``*.ndjson`` file of the folder is read line by line (one resource per line, as the
Bulk Data Access specification writes them; ``Patient.ndjson`` or ``Patient.000.ndjson``)
and each resource is routed by its ``resourceType``; other resource types are skipped.

Why strict checks of the fields used rather than the ``fhir.resources`` models: a release
needs six fields (``Patient.id``, ``.gender``, ``.birthDate``; ``Condition.subject``,
``.code.coding``, ``.onsetDateTime``/``.recordedDate``; ``Encounter.subject``,
``.period.start``), and the models validate everything else too — a server's extension or
a newer element refuses an extract for fields that are never read, and parsing whole
resources costs several times the reading. Each used field is checked here against R4's
datatype rules, and a bad one is refused naming the file, the line and the field path.

Codes: the ``Condition.code.coding`` entries whose ``system`` is ICD-10-CM
(``http://hl7.org/fhir/sid/icd-10-cm``) or ICD-9-CM (``http://hl7.org/fhir/sid/icd-9-cm``);
a Condition with neither is refused. The age at a diagnosis is taken at ``onsetDateTime``,
else ``recordedDate``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.core.errors import InputError
from ehr_release.ingest.clinical import assemble, check_ages, unknown_patient, whole_years
from ehr_release.ingest.limits import InputLimits
from ehr_release.ingest.rules import code_error, code_verdict
from ehr_release.model.dataset import AGE, CODE, PATIENT_ID, Dataset

SYSTEMS = {"http://hl7.org/fhir/sid/icd-10-cm": "icd10",
           "http://hl7.org/fhir/sid/icd-9-cm": "icd9"}
GENDER = {"male": "M", "female": "F", "other": "", "unknown": ""}
#: R4 ``date`` / ``dateTime``: a year, year-month, or full date (then an optional time).
_DATE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T[0-9:.+\-Z]+)?)?)?$")
_ID = re.compile(r"^[A-Za-z0-9\-.]{1,64}$")  # R4 ``id``


def read_fhir(folder: Path, files: list[Path], *, class_column: str | None = None,
              code_system: str | None = None) -> Dataset:
    """Read the NDJSON ``files`` of a bulk export into a Dataset."""
    limits = InputLimits.from_env()
    patients: dict[str, tuple[int, int, str]] = {}  # id → (birth year, birthday, gender)
    where: dict[str, tuple[Path, int]] = {}
    conditions: list[tuple[str, str, str, Path, int]] = []  # subject, code, date, file, line
    encounters: list[tuple[str, str, Path, int]] = []
    for path in files:
        for line, res in _resources(path, limits):
            kind = res.get("resourceType")
            if kind == "Patient":
                pid = _id(res, path, line)
                if pid in patients:
                    raise InputError(f"duplicate patient id (same as {where[pid][0].name} "
                                     f"line {where[pid][1]})", file=str(path), row=line,
                                     column="Patient.id")
                year, md = _birth(res, path, line)
                patients[pid] = (year, md, _gender(res, path, line))
                where[pid] = (path, line)
            elif kind == "Condition":
                conditions.append((_subject(res, "Condition", path, line),
                                   *_coding(res, path, line, limits),
                                   _condition_date(res, path, line), path, line))
            elif kind == "Encounter":
                encounters.append((_subject(res, "Encounter", path, line),
                                   _encounter_date(res, path, line), path, line))
    if not patients:
        raise InputError("no Patient resources in the folder's NDJSON files", file=str(folder))
    if not conditions:
        raise InputError("no Condition resources in the folder's NDJSON files",
                         file=str(folder))
    return _dataset(folder, patients, conditions, encounters, class_column, code_system)


def _dataset(folder: Path, patients: dict[str, tuple[int, int, str]],
             conditions: list, encounters: list, class_column: str | None,
             code_system: str | None) -> Dataset:
    ids = list(patients)
    born = pd.DataFrame([p[:2] for p in patients.values()], index=ids, columns=["y", "md"])
    out = pd.DataFrame(index=pd.Index(ids, name=PATIENT_ID))
    if encounters:
        e_age = _aged([(s, d) for s, d, _, _ in encounters], [e[2:] for e in encounters],
                      born, "Encounter.subject", "Encounter.period.start")
        out["first_visit_age"] = pd.Series(e_age, index=[e[0] for e in encounters]
                                           ).groupby(level=0).min().reindex(ids).to_numpy()
    out["gender"] = [p[2] for p in patients.values()]
    if class_column is not None:
        raise InputError("class column is missing", file=str(folder), column=class_column)
    c_age = _aged([(c[0], c[3]) for c in conditions], [c[4:] for c in conditions], born,
                  "Condition.subject", "Condition.onsetDateTime")
    systems = {c[2] for c in conditions}
    if len(systems) > 1:
        nine, ten = (next(c for c in conditions if c[2] == s) for s in ("icd9", "icd10"))
        raise InputError(f"extract mixes ICD-9-CM and ICD-10-CM codes ({nine[4].name} line "
                         f"{nine[5]} is ICD-9-CM, this one ICD-10-CM); mapping between "
                         "them is not supported", file=str(ten[4]), row=ten[5],
                         column="Condition.code.coding")
    system = systems.pop()
    if code_system is not None and code_system != system:
        c = conditions[0]
        raise InputError(f"the coding system is {system} but {code_system} was declared",
                         file=str(c[4]), row=c[5], column="Condition.code.coding.system")
    verdicts = {c[1]: code_verdict(c[1], system) for c in conditions}
    for c in conditions:  # here, so the message names the Condition's own file and line
        if verdicts[c[1]] is None:
            raise code_error(c[1], c[4], c[5], "Condition.code.coding.code", system)
    diagnoses = pd.DataFrame({PATIENT_ID: [c[0] for c in conditions],
                              CODE: [c[1] for c in conditions], AGE: c_age,
                              "row": [c[5] for c in conditions]})
    first_file = conditions[0][4]
    return assemble(out, diagnoses, code_path=first_file, code_field="Condition.code.coding",
                    code_system=system, source=str(folder))


def _aged(events: list[tuple[str, tuple[int, int, int]]], places: list[tuple[Path, int]],
          born: pd.DataFrame, subject_field: str, date_field: str) -> np.ndarray:
    """Ages at ``events`` (subject, (year, month, day)), refusing an unknown subject or a
    date before birth by file and line."""
    subjects = pd.Series([s for s, _ in events])
    known = set(born.index)
    for i, s in enumerate(subjects):
        if s not in known:
            path, line = places[i]
            unknown_patient(pd.Series([s]), known, np.array([line]), path, subject_field)
    dates = pd.Series(pd.to_datetime([f"{y:04d}-{m:02d}-{d:02d}" for _, (y, m, d) in events]))
    b = born.loc[subjects.to_numpy()]
    ages = whole_years(b["y"].to_numpy(), b["md"].to_numpy(), dates)
    for i in np.flatnonzero((ages < 0) | (ages > 130))[:1]:
        path, line = places[int(i)]
        check_ages(ages[i:i + 1], np.array([line]), path, date_field)
    return ages


# --------------------------------------------------------------------------- fields
def _resources(path: Path, limits: InputLimits):  # noqa: ANN202 - a generator of (line, dict)
    """(line number, resource) of each non-blank line, each line bounded and a JSON object."""
    with path.open("rb") as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(limits.max_line_bytes + 1),
                                          b""), start=1):
            if len(raw) > limits.max_line_bytes and not raw.endswith(b"\n"):
                raise InputError(f"line {number} is longer than {limits.max_line_bytes:,} "
                                 "bytes (EHR_RELEASE_MAX_LINE_BYTES); is this the right "
                                 "file?", file=str(path))
            if not raw.strip():
                continue
            try:
                res = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise InputError("is not a JSON object (NDJSON: one resource per line)",
                                 file=str(path), row=number) from None
            if not isinstance(res, dict):
                raise InputError("is not a JSON object (NDJSON: one resource per line)",
                                 file=str(path), row=number)
            yield number, res


def _bad(path: Path, line: int, field: str, rule: str) -> InputError:
    return InputError(rule, file=str(path), row=line, column=field)


def _id(res: dict, path: Path, line: int) -> str:
    value = res.get("id")
    if not isinstance(value, str) or not _ID.match(value):
        raise _bad(path, line, "Patient.id", "must be a FHIR id (1–64 of A–Z a–z 0–9 - .)")
    return value


def _gender(res: dict, path: Path, line: int) -> str:
    value = res.get("gender", "unknown")
    if value not in GENDER:
        raise _bad(path, line, "Patient.gender", "must be male, female, other or unknown")
    return GENDER[value]


def _date(value: object, path: Path, line: int, field: str, *, full: bool
          ) -> tuple[int, int, int]:
    found = _DATE.match(value) if isinstance(value, str) else None
    if not found or (full and found.group(3) is None):
        rule = "must be a full date (YYYY-MM-DD…)" if full else "must be a FHIR date"
        raise _bad(path, line, field, rule)
    year, month, day = (int(g) if g else 0 for g in found.groups())
    if not 1 <= (month or 1) <= 12 or not 1 <= (day or 1) <= 31:
        raise _bad(path, line, field, "must be a FHIR date")
    return year, month, day


def _birth(res: dict, path: Path, line: int) -> tuple[int, int]:
    year, month, day = _date(res.get("birthDate"), path, line, "Patient.birthDate",
                             full=False)
    return year, month * 100 + day if month and day else 0


def _subject(res: dict, kind: str, path: Path, line: int) -> str:
    ref = res.get("subject")
    value = ref.get("reference") if isinstance(ref, dict) else None
    if not isinstance(value, str) or not value.startswith("Patient/") \
            or not _ID.match(value[len("Patient/"):]):
        raise _bad(path, line, f"{kind}.subject.reference", "must be Patient/<id>")
    return value[len("Patient/"):]


def _coding(res: dict, path: Path, line: int, limits: InputLimits) -> tuple[str, str]:
    code = res.get("code")
    codings = code.get("coding") if isinstance(code, dict) else None
    if not isinstance(codings, list):
        raise _bad(path, line, "Condition.code.coding", "must be a list of codings")
    for coding in codings:
        if isinstance(coding, dict) and coding.get("system") in SYSTEMS:
            value = coding.get("code")
            if not isinstance(value, str) or len(value) > limits.max_field_chars:
                raise _bad(path, line, "Condition.code.coding.code", "must be a code string")
            return value, SYSTEMS[coding["system"]]
    raise _bad(path, line, "Condition.code.coding",
               "has no ICD-10-CM or ICD-9-CM coding (system http://hl7.org/fhir/sid/…)")


def _condition_date(res: dict, path: Path, line: int) -> tuple[int, int, int]:
    field = "onsetDateTime" if "onsetDateTime" in res else "recordedDate"
    return _date(res.get(field), path, line, f"Condition.{field}", full=True)


def _encounter_date(res: dict, path: Path, line: int) -> tuple[int, int, int]:
    period = res.get("period")
    start = period.get("start") if isinstance(period, dict) else None
    return _date(start, path, line, "Encounter.period.start", full=True)
