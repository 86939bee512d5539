"""Loading one table from disk with pandas/pyarrow, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ehr_release.errors import InputError

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
        raise InputError(f"cannot be parsed: {first}", file=str(path)) from None
    except Exception as exc:  # pyarrow raises its own hierarchy for corrupt Parquet
        if type(exc).__module__.startswith("pyarrow"):
            raise InputError(f"cannot be parsed: {exc}", file=str(path)) from None
        raise
    frame.columns = [_canonical(str(c)) for c in frame.columns]
    dupes = frame.columns[frame.columns.duplicated()].tolist()
    if dupes:
        raise InputError("column appears twice", file=str(path), column=dupes[0])
    for col in frame.columns:
        frame[col] = frame[col].astype(str).str.strip()
    return frame


def _canonical(name: str) -> str:
    low = name.strip().lower().replace(" ", "_")
    return ALIASES.get(low, low)


def require_columns(frame: pd.DataFrame, columns: list[str], path: Path) -> None:
    """Raise naming the first required column that is missing."""
    for col in columns:
        if col not in frame.columns:
            have = ", ".join(frame.columns) or "(none)"
            raise InputError(f"required column is missing (columns: {have})",
                             file=str(path), column=col)


def require_rows(frame: pd.DataFrame, path: Path) -> None:
    if frame.empty:
        raise InputError("dataset is empty: no data rows", file=str(path))
