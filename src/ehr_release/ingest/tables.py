"""Loading one table from disk with pandas/pyarrow, with errors that name the file."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd

from ehr_release.core.errors import InputError
from ehr_release.ingest.limits import (
    InputLimits,
    check_field_lengths,
    check_parquet_file,
    check_text_file,
)
from ehr_release.ingest.rules import (
    CSV_SUFFIXES,
    PARQUET_SUFFIXES,
    TSV_SUFFIXES,
    canonical_columns,
    check_path,
    short_row_error,
)
from ehr_release.ingest.rules import require_columns as require_named_columns
from ehr_release.ingest.rules import require_rows as require_row_count

#: How pandas' C parser words a row with more fields than the header.
_LONG_ROW = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def read_table(path: Path) -> pd.DataFrame:
    """Read a CSV/TSV/Parquet file as strings, with lower-cased, alias-resolved column names.

    Everything is read as text so that validation (codes, ages) happens in one place with
    row numbers, instead of pandas guessing types and silently turning ``0401`` into 401.
    """
    suffix = check_path(path)
    limits = InputLimits.from_env()
    longest_line: int | None = None  # bytes; bounds every field of a text file
    if suffix in CSV_SUFFIXES | TSV_SUFFIXES:
        longest_line = check_text_file(path, "\t" if suffix in TSV_SUFFIXES else ",", limits)
    elif suffix in PARQUET_SUFFIXES:
        check_parquet_file(path, limits)
    try:
        if suffix in CSV_SUFFIXES:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
        elif suffix in TSV_SUFFIXES:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, sep="\t")
        else:
            frame = pd.read_parquet(path)
            frame = frame.astype("string").fillna("").astype(object)
    except pd.errors.EmptyDataError:
        raise InputError("file is empty (no header, no data rows)", file=str(path)) from None
    except UnicodeDecodeError as exc:
        if suffix in PARQUET_SUFFIXES:
            raise InputError("cannot be parsed", file=str(path), detail=str(exc)) from None
        raise InputError(f"line {_first_line_not_utf8(path)} is not UTF-8 text (save the "
                         "file as UTF-8)", file=str(path)) from None
    except (pd.errors.ParserError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if long := _LONG_ROW.search(first):  # pandas' words; the stored message keeps them
            expected, line, saw = long.groups()
            raise InputError(f"cannot be parsed: line {line} has {saw} fields where the "
                             f"header has {expected}", file=str(path)) from None
        raise InputError("cannot be parsed", file=str(path), detail=first) from None
    except Exception as exc:  # pyarrow raises its own hierarchy for corrupt Parquet
        if type(exc).__module__.startswith("pyarrow"):
            raise InputError("cannot be parsed as Parquet", file=str(path),
                             detail=str(exc)) from None
        raise
    if longest_line is None or longest_line > limits.max_field_chars:
        check_field_lengths(path, frame, limits)
    if suffix in CSV_SUFFIXES | TSV_SUFFIXES:
        _refuse_short_rows(path, frame, "\t" if suffix in TSV_SUFFIXES else ",")
    frame.columns = canonical_columns(list(frame.columns), path)
    for col in frame.columns:
        frame[col] = frame[col].astype(str).str.strip()
    return frame


def _first_line_not_utf8(path: Path) -> int:
    """The first line (1-based, header included) that does not decode as UTF-8: pandas only
    names a byte offset into its own buffer. Read only after a decoding failure."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 1  # pandas failed on what a line-wise read accepts: say the file's start


def _refuse_short_rows(path: Path, frame: pd.DataFrame, delimiter: str) -> None:
    """Refuse a row with fewer fields than the header, which pandas pads with empty values.

    A padded row ends in an empty value, so the file is read again (standard-library
    ``csv``, as the preflight does) only when some row's last value is empty: a good
    extract whose last column is always filled costs nothing more.
    """
    width = len(frame.columns)
    if width < 2 or not frame.iloc[:, -1].eq("").any():
        return
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, delimiter=delimiter,
                                skipinitialspace=delimiter == ",")
            next(reader, None)
            records = (r for r in reader if r)  # pandas skips blank lines too
            for row, record in enumerate(records, start=1):
                if len(record) < width:
                    raise short_row_error(path, row, len(record), width)
    except csv.Error:
        return  # a field over csv's own size limit: pandas read it, so let it stand


def require_columns(frame: pd.DataFrame, columns: list[str], path: Path) -> None:
    """Raise naming the first required column that is missing."""
    require_named_columns(list(frame.columns), columns, path)


def require_rows(frame: pd.DataFrame, path: Path) -> None:
    require_row_count(len(frame), path)
