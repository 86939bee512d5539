"""Size limits on input files, checked while streaming, before any parser sees the file.

A hostile or broken file must be refused in seconds with one line: measured before these
limits, a 9.9 MB CSV with a million columns kept pandas busy for 15 minutes at 2.9 GB, and a
200 MB file without a newline came back as a 200 MB error message; an 848 KB Parquet file
holding 30M rows took 10.5 GB before it was killed, and a 10M-row, 509 MB CSV 8 GB and
counting (issue 33). So whole tables are bounded too — rows, cells, bytes as read, and the
memory their read would take, estimated before reading — by a Parquet file's footer or a
text file's size and a count of its lines. The limits are generous for real extracts (a
patient's whole code list fits many times in one field) and configurable per site through
the environment.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

from ehr_release.core.errors import InputError

#: Bytes read per step while scanning a file for over-long lines.
_CHUNK = 1 << 20


#: Memory a read costs, measured with ``bench/input_memory.py`` (peak resident memory of
#: :func:`ehr_release.ingest.readers.read_dataset` above the interpreter's, rounded up): per
#: byte of a CSV/TSV file (24-31 measured), per byte of a Parquet file's uncompressed
#: column data (42-52), and per cell of any table (135 CSV, 193 Parquet, for short
#: values). A read is estimated at the larger of its bytes' and its cells' cost.
MEMORY_PER_TEXT_BYTE = 32
MEMORY_PER_PARQUET_BYTE = 56
MEMORY_PER_CELL = 200
_MB = 1 << 20

#: Each limit's field, environment variable and what the refusal calls it.
_ENV = (("max_columns", "EHR_RELEASE_MAX_COLUMNS"),
        ("max_line_bytes", "EHR_RELEASE_MAX_LINE_BYTES"),
        ("max_field_chars", "EHR_RELEASE_MAX_FIELD_CHARS"),
        ("max_rows", "EHR_RELEASE_MAX_ROWS"),
        ("max_cells", "EHR_RELEASE_MAX_CELLS"),
        ("max_input_bytes", "EHR_RELEASE_MAX_INPUT_BYTES"),
        ("memory_budget_mb", "EHR_RELEASE_MEMORY_BUDGET_MB"))


@dataclass(frozen=True)
class InputLimits:
    """The largest input shapes accepted, per table (file).

    Columns, bytes per line and characters per field bound one line; rows, cells (rows ×
    columns), bytes as read (a text file's size, a Parquet file's uncompressed size: what
    a small compressed file expands to) and the memory budget bound the whole table. The
    budget is what reading the table may take (4 GiB by default), estimated before it is
    read from its bytes and cells (the costs above); 5,000,000 rows is about what a
    three-column table (a long diagnoses table: patient, code, age) can hold within it
    (5M × 3 cells × 200 B ≈ 3 GB), and 20,000,000 cells the budget over a cell's cost.
    """

    max_columns: int = 2_000
    max_line_bytes: int = 1 << 20
    max_field_chars: int = 1 << 16
    max_rows: int = 5_000_000
    max_cells: int = 20_000_000
    max_input_bytes: int = 1 << 30
    memory_budget_mb: int = 4_096

    @classmethod
    def from_env(cls) -> InputLimits:
        """Each limit may be overridden by its ``EHR_RELEASE_MAX_…`` variable (:data:`_ENV`)."""
        defaults = cls()
        values = {}
        for field, env in _ENV:
            raw = os.environ.get(env)
            if raw is None:
                values[field] = getattr(defaults, field)
                continue
            try:
                values[field] = int(raw)
                if values[field] < 1:
                    raise ValueError
            except ValueError:
                raise InputError(f"{env} must be a positive whole number") from None
        return cls(**values)


def check_input_bytes(path: Path, size: int, per_byte: int, limits: InputLimits,
                      what: str = "bytes") -> None:
    """Refuse a table of ``size`` bytes as read, or whose read would overrun the budget."""
    if size > limits.max_input_bytes:
        raise InputError(f"{size:,} {what}, more than the {limits.max_input_bytes:,} accepted "
                         "(EHR_RELEASE_MAX_INPUT_BYTES)", file=str(path))
    _check_memory(path, size * per_byte, limits)


def check_table_shape(path: Path, rows: int, columns: int, limits: InputLimits, *,
                      at_least: bool = False) -> None:
    """Refuse a table of ``rows`` × ``columns`` (``at_least``: counted so far, not all)."""
    more = "at least " if at_least else ""
    if rows > limits.max_rows:
        raise InputError(f"{more}{rows:,} rows, more than the {limits.max_rows:,} accepted "
                         "(EHR_RELEASE_MAX_ROWS)", file=str(path))
    if rows * columns > limits.max_cells:
        raise InputError(f"{more}{rows * columns:,} cells ({rows:,} rows × {columns:,} "
                         f"columns), more than the {limits.max_cells:,} accepted "
                         "(EHR_RELEASE_MAX_CELLS)", file=str(path))
    _check_memory(path, rows * columns * MEMORY_PER_CELL, limits)


def _check_memory(path: Path, need: int, limits: InputLimits) -> None:
    if need > limits.memory_budget_mb * _MB:
        raise InputError(f"reading it needs about {need / _MB:,.0f} MB, more than the "
                         f"memory budget of {limits.memory_budget_mb:,} MB "
                         "(EHR_RELEASE_MEMORY_BUDGET_MB)", file=str(path))


def check_parquet_file(path: Path, limits: InputLimits) -> None:
    """Refuse a Parquet file by its footer alone, before any data is read: columns, rows
    and cells as the footer states them, and its uncompressed size (an 848 KB file held
    30M rows and took 10.5 GB before it was killed, issue 33)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable footer is a parse failure
        raise InputError("cannot be parsed as Parquet", file=str(path),
                         detail=str(exc)) from None
    columns = len(meta.schema.to_arrow_schema().names)
    check_column_count(path, columns, limits)
    check_table_shape(path, meta.num_rows, columns, limits)
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    check_input_bytes(path, size, MEMORY_PER_PARQUET_BYTE, limits,
                      what="bytes of uncompressed data")


def check_text_file(path: Path, delimiter: str, limits: InputLimits) -> int:
    """Refuse a CSV/TSV whose size, lines, header, rows or cells exceed the limits, reading
    it once in chunks (and not at all when its size alone is too much).

    Newlines are found with NumPy a chunk at a time (a 40 MB, 1M-line file in about 0.05 s),
    so the scan costs little next to parsing; rows are counted as lines after the header
    (an upper bound: a quoted field may span lines), and a file is refused as soon as the
    count passes a limit. Returns the longest line in bytes: no field can be longer than
    its line, so when that is within the field limit the per-cell check after parsing is
    not needed.
    """
    import numpy as np  # here: the CLI's preflight imports this module before numpy

    check_input_bytes(path, path.stat().st_size, MEMORY_PER_TEXT_BYTE, limits)
    line, line_start, offset, longest = 1, 0, 0, 0
    header: bytes | None = None
    columns = 0
    first = b""
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + offset
            if len(ends):
                starts = np.concatenate(([line_start], ends[:-1] + 1))
                lengths = ends - starts
                over = np.flatnonzero(lengths > limits.max_line_bytes)
                if len(over):
                    _too_long(path, line + int(over[0]), limits)
                longest = max(longest, int(lengths.max()))
                if header is None:
                    header = first + chunk[:int(ends[0]) - offset]
                    columns = _check_header(path, header, delimiter, limits)
                line += len(ends)
                line_start = int(ends[-1]) + 1
                check_table_shape(path, line - 2, columns, limits, at_least=True)
            elif header is None:
                first += chunk
            offset += len(chunk)
            if offset - line_start > limits.max_line_bytes:
                _too_long(path, line, limits)
    if header is None:
        columns = _check_header(path, first, delimiter, limits)
    check_table_shape(path, line - 2 + (offset > line_start), columns, limits)
    return max(longest, offset - line_start)


def _too_long(path: Path, line: int, limits: InputLimits) -> None:
    raise InputError(f"line {line} is longer than {limits.max_line_bytes:,} bytes "
                     "(EHR_RELEASE_MAX_LINE_BYTES); is this the right file?", file=str(path))


def _check_header(path: Path, header: bytes, delimiter: str, limits: InputLimits) -> int:
    """Refuse a header of too many columns; else its column count."""
    text = header.decode("utf-8", errors="replace").rstrip("\r")
    try:
        count = len(next(csv.reader(io.StringIO(text), delimiter=delimiter), []))
    except csv.Error:  # unparseable header: the parser will say so; bound it meanwhile
        count = text.count(delimiter) + 1
    check_column_count(path, count, limits)
    return count


def check_column_count(path: Path, count: int, limits: InputLimits) -> None:
    if count > limits.max_columns:
        raise InputError(f"{count:,} columns, more than the {limits.max_columns:,} accepted "
                         "(EHR_RELEASE_MAX_COLUMNS)", file=str(path))


def check_field_lengths(path: Path, frame: object, limits: InputLimits) -> None:
    """Refuse the first cell longer than the limit, naming its row and column (not its text)."""
    import pandas as pd

    assert isinstance(frame, pd.DataFrame)
    for position, column in enumerate(frame.columns, start=1):
        lengths = frame[column].str.len()  # every cell is text (see tables.read_table)
        if len(lengths) and int(lengths.max()) > limits.max_field_chars:
            row = int(lengths.to_numpy().argmax()) + 1
            # The column by position; its name only as terminal detail (it may be data).
            raise InputError(f"the value in column {position} is longer than "
                             f"{limits.max_field_chars:,} characters "
                             "(EHR_RELEASE_MAX_FIELD_CHARS)", file=str(path), row=row,
                             detail=f"column {str(column)!r}")
