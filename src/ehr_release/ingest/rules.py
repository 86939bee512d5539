"""What makes an input acceptable, value by value — written once, without pandas.

Two readers apply these rules: the full reader (:mod:`ehr_release.ingest.readers`, pandas,
vectorized over each column's distinct values) and the CLI's preflight
(:mod:`ehr_release.ingest.preflight`, the standard library's ``csv``, so a bad file is
refused before pandas has even loaded). Because both ask the same functions, they cannot
disagree about what a valid age, code, identifier or header is, or about the message.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from pathlib import Path

from ehr_release.core.errors import InputError

MAX_AGE = 130
CSV_SUFFIXES = {".csv", ".txt"}
TSV_SUFFIXES = {".tsv"}
PARQUET_SUFFIXES = {".parquet", ".pq"}

#: Column-name aliases: MIMIC and common exports → our canonical names.
ALIASES = {
    "subject_id": "patient_id",
    "patientid": "patient_id",
    "patient": "patient_id",
    "icd9_code": "code",
    "icd9": "code",
    "icd_code": "code",
    "hadm_id": "admission",
    "admission_id": "admission",
    "dob": "birth_date",
    "admittime": "admit_date",
}

#: A plain decimal number (sign, digits, optional fraction and exponent), ASCII only: what a
#: spreadsheet writes for an age. ``nan``, ``inf``, ``1_0`` and non-ASCII digits are not ages.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
#: Verdicts of :func:`age_verdict` besides a valid age (an int) or a blank (None).
NOT_A_NUMBER = "not a number"
OUT_OF_RANGE = "out of range"


def check_path(path: Path) -> str:
    """The file's lower-cased suffix, after refusing a missing file, a folder or a format we
    do not read (the same words whichever reader asks)."""
    if not path.exists():
        raise InputError("file does not exist", file=str(path))
    if path.is_dir():
        raise InputError("is a directory, expected a CSV or Parquet file", file=str(path))
    if not path.is_file():  # a named pipe or a device: reading it blocks or never ends
        raise InputError("is not a regular file", file=str(path))
    suffix = path.suffix.lower()
    if suffix not in CSV_SUFFIXES | TSV_SUFFIXES | PARQUET_SUFFIXES:
        raise InputError(
            f"unknown format {suffix or '(no extension)'!r}; expected .csv, .tsv or .parquet",
            file=str(path),
        )
    return suffix


def canonical_columns(names: Sequence[object], path: Path) -> list[str]:
    """Lower-cased, alias-resolved column names; refuses a name that appears twice."""
    columns = [_canonical(str(c)) for c in names]
    seen: set[str] = set()
    for name in columns:
        if name in seen:
            # The name goes to the terminal only: a file without its header row has data there.
            raise InputError("a column name appears twice", file=str(path),
                             detail=f"column {name!r}")
        seen.add(name)
    return columns


def _canonical(name: str) -> str:
    low = name.strip().lower().replace(" ", "_")
    return ALIASES.get(low, low)


def require_columns(have: Sequence[str], columns: Sequence[str], path: Path) -> None:
    """Raise naming the first required column that is missing."""
    for col in columns:
        if col not in have:
            found = ", ".join(have) or "(none)"
            # The header found is terminal-only detail: without a header row it is data.
            raise InputError("required column is missing", file=str(path), column=col,
                             detail=f"columns found: {found}")


def short_row_error(path: Path, row: int, fields: int, width: int) -> InputError:
    """A data row with fewer fields than the header: pandas would pad it with empty values
    (a truncated line released without its codes), so both readers refuse it. The row's
    text stays out of the message: it is a patient's."""
    return InputError(f"has {fields} field{'s' * (fields != 1)} where the header has {width}",
                      file=str(path), row=row)


def require_rows(count: int, path: Path) -> None:
    if count == 0:
        raise InputError("dataset is empty: no data rows", file=str(path))


def blank_id_row(ids: Sequence[str]) -> int | None:
    """The first row (1-based) whose patient id is empty, if any."""
    for row, value in enumerate(ids, start=1):
        if value == "":
            return row
    return None


def duplicate_id_rows(ids: Sequence[str]) -> tuple[int, int] | None:
    """``(row, first_row)`` of the first id seen before, if any (rows 1-based)."""
    first: dict[str, int] = {}
    for row, value in enumerate(ids, start=1):
        if value in first:
            return row, first[value]
        first[value] = row
    return None


def id_problem(ids: Sequence[str], path: Path, column: str = "patient_id") -> None:
    """Refuse an empty or repeated patient id, by row — never the identifier itself, since
    messages end up in logs and the audit trail."""
    blank = blank_id_row(ids)
    if blank is not None:
        raise InputError("patient id is empty", file=str(path), row=blank, column=column)
    dup = duplicate_id_rows(ids)
    if dup is not None:
        raise InputError(f"duplicate patient id (same as row {dup[1]})", file=str(path),
                         row=dup[0], column=column)


def age_verdict(text: str) -> int | str | None:
    """A valid age as an int, ``None`` for a blank, else :data:`NOT_A_NUMBER` or
    :data:`OUT_OF_RANGE` (negative, above :data:`MAX_AGE`, or not whole)."""
    if text == "":
        return None
    if not _NUMBER.fullmatch(text):
        return NOT_A_NUMBER
    value = float(text)
    if value < 0 or value > MAX_AGE or not value.is_integer():
        return OUT_OF_RANGE
    return int(value)


def age_error(verdict: str, text: str, path: Path, row: int, column: str) -> InputError:
    """The one message for an age whose verdict is a problem."""
    problem = ("age is not a number" if verdict == NOT_A_NUMBER
               else f"age must be a whole number from 0 to {MAX_AGE}")
    return InputError(problem, file=str(path), row=row, column=column,
                      detail=f"found {text!r}")


def code_verdict(text: str, system: str = "icd9") -> str | None:
    """The dotted code ``text`` names, or None when it is not a node of the code system's
    hierarchy (``icd9`` or ``icd10``; the root is not a code)."""
    from ehr_release.model.hierarchy import code_system

    cs = code_system(system)
    hierarchy = cs.hierarchy()
    code = cs.normalize(text)
    return code if code in hierarchy and code != hierarchy.root else None


def code_error(text: str, path: Path, row: int, column: str,
               system: str = "icd9") -> InputError:
    """The one message for a code that is not a node of the code system's hierarchy."""
    from ehr_release.model.hierarchy import code_system

    cs = code_system(system)
    problem = (f"malformed {cs.short} code: not a node of the {cs.label} hierarchy"
               if text else f"empty {cs.short} code")
    return InputError(problem, file=str(path), row=row, column=column,
                      detail=f"found {text!r}" if text else None)


def detect_code_system(texts: Collection[str], declared: str | None = None
                       ) -> str | tuple[str, str]:
    """The code system of an extract's distinct code ``texts``: ``declared`` when given,
    else ``icd10`` if some code is a node of ICD-10-CM only, else ``icd9`` (the default:
    ``V01`` or ``E849`` are nodes of both, and every extract before ICD-10 was ICD-9).

    An extract holding both an ICD-9-only code (``250.00``) and an ICD-10-only one
    (``E11.9``) returns that pair instead: GEM mapping between them is not done, so the
    caller refuses the extract with :func:`mixed_error`.
    """
    if declared is not None:
        from ehr_release.model.hierarchy import code_system

        code_system(declared)  # refuse an unknown name before reading on
        return declared
    if all(code_verdict(t, "icd9") for t in texts):  # no need to load ICD-10-CM (≈1 s)
        return "icd9"
    only9 = only10 = None
    for text in texts:
        in9, in10 = code_verdict(text, "icd9"), code_verdict(text, "icd10")
        if in9 and not in10 and only9 is None:
            only9 = text
        elif in10 and not in9 and only10 is None:
            only10 = text
        if only9 is not None and only10 is not None:
            return only9, only10
    return "icd10" if only10 is not None else "icd9"


def mixed_error(path: Path, row9: int, row10: int, column: str) -> InputError:
    """The one message for an extract that mixes ICD-9-CM and ICD-10-CM codes (rows only:
    the codes are a patient's)."""
    return InputError(f"extract mixes ICD-9-CM and ICD-10-CM codes (row {row9} is ICD-9-CM "
                      f"only, row {row10} ICD-10-CM only); mapping between them is not "
                      "supported: split the extract or convert one part first",
                      file=str(path), row=row10, column=column)


#: What separates the codes of a wide file's ``codes`` cell.
CODE_SEPARATOR = re.compile(r"[;\s]+")


def split_codes(cell: str) -> list[str]:
    """The tokens of a wide file's ``codes`` cell (separated by ``;`` or whitespace)."""
    return [t for t in CODE_SEPARATOR.split(cell) if t]
