"""Loading one table from disk with pandas/pyarrow, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ehr_release.errors import InputError
from ehr_release.ingest.limits import (
    InputLimits,
    check_column_count,
    check_field_lengths,
    check_text_file,
)

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


def read_table(path: Path) -> pd.DataFrame:
    """Read a CSV/TSV/Parquet file as strings, with lower-cased, alias-resolved column names.

    Everything is read as text so that validation (codes, ages) happens in one place with
    row numbers, instead of pandas guessing types and silently turning ``0401`` into 401.
    """
    if not path.exists():
        raise InputError("file does not exist", file=str(path))
    if path.is_dir():
        raise InputError("is a directory, expected a CSV or Parquet file", file=str(path))
    suffix = path.suffix.lower()
    limits = InputLimits.from_env()
    longest_line: int | None = None  # bytes; bounds every field of a text file
    if suffix in CSV_SUFFIXES | TSV_SUFFIXES:
        longest_line = check_text_file(path, "\t" if suffix in TSV_SUFFIXES else ",", limits)
    elif suffix in PARQUET_SUFFIXES:
        check_column_count(path, _parquet_columns(path), limits)
    try:
        if suffix in CSV_SUFFIXES:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
        elif suffix in TSV_SUFFIXES:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, sep="\t")
        elif suffix in PARQUET_SUFFIXES:
            frame = pd.read_parquet(path)
            frame = frame.astype("string").fillna("").astype(object)
        else:
            raise InputError(
                f"unknown format {suffix or '(no extension)'!r}; expected .csv, .tsv or .parquet",
                file=str(path),
            )
    except InputError:
        raise
    except pd.errors.EmptyDataError:
        raise InputError("file is empty (no header, no data rows)", file=str(path)) from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError("cannot be parsed", file=str(path), detail=first) from None
    except Exception as exc:  # pyarrow raises its own hierarchy for corrupt Parquet
        if type(exc).__module__.startswith("pyarrow"):
            raise InputError("cannot be parsed as Parquet", file=str(path),
                             detail=str(exc)) from None
        raise
    if longest_line is None or longest_line > limits.max_field_chars:
        check_field_lengths(path, frame, limits)
    frame.columns = [_canonical(str(c)) for c in frame.columns]
    dupes = frame.columns[frame.columns.duplicated()].tolist()
    if dupes:
        # The name goes to the terminal only: a file without its header row has data there.
        raise InputError("a column name appears twice", file=str(path),
                         detail=f"column {dupes[0]!r}")
    for col in frame.columns:
        frame[col] = frame[col].astype(str).str.strip()
    return frame


def _parquet_columns(path: Path) -> int:
    """Columns of a Parquet file from its footer alone (no data read)."""
    import pyarrow.parquet as pq

    try:
        return len(pq.read_schema(path).names)
    except Exception as exc:  # noqa: BLE001 - any unreadable footer is a parse failure
        raise InputError("cannot be parsed as Parquet", file=str(path),
                         detail=str(exc)) from None


def _canonical(name: str) -> str:
    low = name.strip().lower().replace(" ", "_")
    return ALIASES.get(low, low)


def require_columns(frame: pd.DataFrame, columns: list[str], path: Path) -> None:
    """Raise naming the first required column that is missing."""
    for col in columns:
        if col not in frame.columns:
            have = ", ".join(frame.columns) or "(none)"
            # The header found is terminal-only detail: without a header row it is data.
            raise InputError("required column is missing", file=str(path), column=col,
                             detail=f"columns found: {have}")


def require_rows(frame: pd.DataFrame, path: Path) -> None:
    if frame.empty:
        raise InputError("dataset is empty: no data rows", file=str(path))
