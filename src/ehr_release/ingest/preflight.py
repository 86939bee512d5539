"""A first read of a request's input without pandas, so the CLI refuses a bad file at once.

The full reader (:mod:`ehr_release.ingest.readers`) needs pandas, whose import alone takes
about 0.4 s here. This preflight reads a plain CSV/TSV extract — a wide file, or a patients
table plus a long diagnoses table — with the standard library and applies the same rules in
the same order (:mod:`ehr_release.ingest.rules`), so it raises the very error the full
reader would raise, naming file, row and column.

It only ever refuses; it never accepts on the full reader's behalf. Whenever it cannot be
sure to agree with the full reader — a MIMIC folder, Parquet, an admissions table (dates),
a row longer than the header, a repeated raw header, text that is not UTF-8, a very large
file — it returns without a verdict and the full reader decides, as before. It does refuse
every table, of any format, that is too large to read at all (:func:`check_volume`).
"""

from __future__ import annotations

import csv
from pathlib import Path

from ehr_release.core.errors import InputError
from ehr_release.ingest.limits import InputLimits, check_parquet_file, check_text_file
from ehr_release.ingest.rules import (
    CSV_SUFFIXES,
    NOT_A_NUMBER,
    OUT_OF_RANGE,
    PARQUET_SUFFIXES,
    TSV_SUFFIXES,
    age_error,
    age_verdict,
    canonical_columns,
    check_path,
    code_error,
    code_verdict,
    detect_code_system,
    id_problem,
    mixed_error,
    require_columns,
    require_rows,
    short_row_error,
    split_codes,
)

#: Files larger than this go straight to the full reader. The pass costs a good file about
#: 0.16 s per MB on the CLI's path before the run starts (0.35 s for 58,302 records, 2.2 MB),
#: and saves a bad one only the pandas import (about 0.4 s): beyond 1 MB a good file's
#: cost outweighs a bad one's saving. The full reader raises the same error either way.
MAX_PREFLIGHT_BYTES = 1 << 20

CODES, PATIENT_ID, CODE, AGE = "codes", "patient_id", "code", "age"
#: The tables of a MIMIC folder the full reader reads (``mimic3.MIMIC_TABLES``, which
#: needs pandas to import).
MIMIC_TABLES = ("patients", "admissions", "diagnoses_icd")


class Undecided(Exception):
    """The preflight cannot be sure to agree with the full reader; let that one decide."""


Table = tuple[list[str], list[list[str]]]


def preflight(input_path: str | Path, diagnoses_path: str | Path | None = None, *,
              admissions_path: str | Path | None = None,
              class_column: str | None = None, code_system: str | None = None,
              code_mapping: str | None = None) -> None:
    """Raise the full reader's :class:`InputError` for a bad plain-text extract, if it can.

    ``code_system`` (``icd9``/``icd10``) declares the codes' system; None detects it.
    With a ``code_mapping`` the full reader decides about the codes (mixed on purpose).

    Returns None when the input passed or when the preflight cannot decide (see module
    docstring); the full reader runs afterwards in both cases.
    """
    if code_mapping is not None:
        _check_mapping(code_system, code_mapping)
    try:
        path = Path(input_path)
        if path.is_dir():
            for table in sorted(path.iterdir()):
                if (table.suffix.lower() in {".csv", ".parquet"}
                        and table.stem.lower() in MIMIC_TABLES):
                    check_volume(table)
            return
        if admissions_path is not None:
            for table in (path, diagnoses_path, admissions_path):
                check_volume(Path(table))
            return
        if code_system is not None:
            from ehr_release.model.hierarchy import code_system as known

            try:
                known(code_system)
            except ValueError as exc:
                raise InputError(str(exc)) from None
        if code_mapping is not None:
            return
        if diagnoses_path is None:
            _check_wide(path, class_column, code_system)
        else:
            _check_long(path, Path(diagnoses_path), class_column, code_system)
    except Undecided:
        return


def _check_mapping(code_system: str | None, code_mapping: str) -> None:
    """The one mapping offered, and only towards ICD-10-CM (the request model says the same)."""
    from ehr_release.ingest.gem import GEM

    if code_mapping != GEM:
        raise InputError(f"unknown code mapping {code_mapping!r}; expected {GEM!r} (ICD-9-CM "
                         "to ICD-10-CM by the CMS General Equivalence Mappings)")
    if code_system == "icd9":
        raise InputError("code mapping gem maps ICD-9-CM codes to ICD-10-CM: declare code "
                         "system icd10, or none")


def check_volume(path: Path) -> int | None:
    """Refuse a table too large to read (:mod:`ehr_release.ingest.limits`) at once, whatever
    else the preflight leaves to the full reader: a Parquet file by its footer, a text file
    by its size and a scan of its lines (whose longest line, in bytes, is returned). Without
    this a 30M-row Parquet file went to pandas (issue 33)."""
    suffix = check_path(path)
    limits = InputLimits.from_env()
    if suffix in PARQUET_SUFFIXES:
        check_parquet_file(path, limits)
        return None
    return check_text_file(path, "\t" if suffix in TSV_SUFFIXES else ",", limits)


def _read(path: Path) -> Table:
    """Header (canonical names) and rows, every cell stripped, exactly as the full reader
    would see them — or :class:`Undecided`."""
    longest = check_volume(path)
    suffix = check_path(path)
    if suffix not in CSV_SUFFIXES | TSV_SUFFIXES or path.stat().st_size > MAX_PREFLIGHT_BYTES:
        raise Undecided
    tsv = suffix in TSV_SUFFIXES
    if longest is None or longest > InputLimits.from_env().max_field_chars:
        raise Undecided  # the full reader names the over-long cell
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, delimiter="\t" if tsv else ",",
                                skipinitialspace=not tsv, strict=True)
            records = [r for r in reader if r]  # pandas skips blank lines too
    except (UnicodeDecodeError, csv.Error):
        raise Undecided from None
    if not records:
        raise Undecided  # the full reader words an empty file
    raw_header = records[0]
    if len(set(raw_header)) != len(raw_header) or any('"' in c for c in raw_header):
        raise Undecided  # pandas renames repeated names ("a", "a.1")
    width = len(raw_header)
    rows = records[1:]
    if any(len(r) > width for r in rows):
        raise Undecided  # pandas words a long row its own way
    short = next((i for i, r in enumerate(rows, start=1) if len(r) < width), None)
    if short is not None:
        raise short_row_error(path, short, len(rows[short - 1]), width)
    header = canonical_columns(raw_header, path)
    return header, [[cell.strip() for cell in r] for r in rows]


def _column(table: Table, name: str) -> list[str]:
    header, rows = table
    i = header.index(name)
    return [r[i] for r in rows]


def _check_wide(path: Path, class_column: str | None, code_system: str | None) -> None:
    table = _read(path)
    header, rows = table
    require_columns(header, [PATIENT_ID, CODES], path)
    require_rows(len(rows), path)
    id_problem(_column(table, PATIENT_ID), path)
    _check_demographics(table, path, class_column)
    cells = _column(table, CODES)
    codes: list[tuple[str, int]] = []
    ages: list[tuple[str, int]] = []
    for row, cell in enumerate(cells, start=1):
        for token in split_codes(cell):
            code, _, age = token.partition("@")
            codes.append((code, row))
            ages.append((age, row))
    _check_codes(codes, path, CODES, code_system)
    _check_ages(ages, path, CODES)


def _check_long(path: Path, diagnoses_path: Path, class_column: str | None,
                code_system: str | None) -> None:
    patients = _read(path)
    require_columns(patients[0], [PATIENT_ID], path)
    require_rows(len(patients[1]), path)
    ids = _column(patients, PATIENT_ID)
    id_problem(ids, path)
    diagnoses = _read(diagnoses_path)
    require_columns(diagnoses[0], [PATIENT_ID, CODE], diagnoses_path)
    _check_demographics(patients, path, class_column)
    require_rows(len(diagnoses[1]), diagnoses_path)
    known = set(ids)
    for row, pid in enumerate(_column(diagnoses, PATIENT_ID), start=1):
        if pid not in known:
            raise InputError("patient id is not in the patients table",
                             file=str(diagnoses_path), row=row, column=PATIENT_ID)
    rows = range(1, len(diagnoses[1]) + 1)
    _check_codes(list(zip(_column(diagnoses, CODE), rows, strict=True)), diagnoses_path,
                 CODE, code_system)
    if AGE in diagnoses[0]:
        _check_ages(list(zip(_column(diagnoses, AGE), rows, strict=True)), diagnoses_path,
                    AGE)


def _check_demographics(table: Table, path: Path, class_column: str | None) -> None:
    header = table[0]
    if class_column is not None and (class_column not in header or class_column == CODES):
        raise InputError("class column is missing", file=str(path), column=class_column)
    if AGE in header:
        rows = range(1, len(table[1]) + 1)
        _check_ages(list(zip(_column(table, AGE), rows, strict=True)), path, AGE)


def _check_codes(codes: list[tuple[str, int]], path: Path, column: str,
                 code_system: str | None = None) -> None:
    distinct = list(dict.fromkeys(t for t, _ in codes))
    system = detect_code_system(distinct, code_system)
    if isinstance(system, tuple):
        first = {text: row for text, row in reversed(codes)}
        raise mixed_error(path, first[system[0]], first[system[1]], column)
    verdicts = {text: code_verdict(text, system) for text in distinct}
    for text, row in codes:
        if verdicts[text] is None:
            raise code_error(text, path, row, column, system)


def _check_ages(ages: list[tuple[str, int]], path: Path, column: str) -> None:
    verdicts = {text: age_verdict(text) for text in {t for t, _ in ages}}
    for problem in (NOT_A_NUMBER, OUT_OF_RANGE):
        for text, row in ages:
            if verdicts[text] == problem:
                raise age_error(problem, text, path, row, column)
