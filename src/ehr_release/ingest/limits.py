"""Size limits on input files, checked while streaming, before any parser sees the file.

A hostile or broken file must be refused in seconds with one line: measured before these
limits, a 9.9 MB CSV with a million columns kept pandas busy for 15 minutes at 2.9 GB, and a
200 MB file without a newline came back as a 200 MB error message. The limits are generous
for real extracts (a patient's whole code list fits many times in one field) and
configurable per site through the environment.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

from ehr_release.errors import InputError

#: Bytes read per step while scanning a file for over-long lines.
_CHUNK = 1 << 20


@dataclass(frozen=True)
class InputLimits:
    """The largest input shapes accepted: columns, bytes per line, characters per field."""

    max_columns: int = 2_000
    max_line_bytes: int = 1 << 20
    max_field_chars: int = 1 << 16

    @classmethod
    def from_env(cls) -> InputLimits:
        """``EHR_RELEASE_MAX_COLUMNS``, ``…_MAX_LINE_BYTES``, ``…_MAX_FIELD_CHARS`` override."""
        defaults = cls()
        values = {}
        for field, env in (("max_columns", "EHR_RELEASE_MAX_COLUMNS"),
                           ("max_line_bytes", "EHR_RELEASE_MAX_LINE_BYTES"),
                           ("max_field_chars", "EHR_RELEASE_MAX_FIELD_CHARS")):
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


def check_text_file(path: Path, delimiter: str, limits: InputLimits) -> int:
    """Refuse a CSV/TSV whose lines or header exceed the limits, reading it once in chunks.

    Newlines are found with NumPy a chunk at a time (a 40 MB, 1M-line file in about 0.05 s),
    so the scan costs little next to parsing. Returns the longest line in bytes: no field
    can be longer than its line, so when that is within the field limit the per-cell check
    after parsing is not needed.
    """
    import numpy as np  # here: the CLI's preflight imports this module before numpy

    line, line_start, offset, longest = 1, 0, 0, 0
    header: bytes | None = None
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
                line += len(ends)
                line_start = int(ends[-1]) + 1
            elif header is None:
                first += chunk
            offset += len(chunk)
            if offset - line_start > limits.max_line_bytes:
                _too_long(path, line, limits)
    _check_header(path, first if header is None else header, delimiter, limits)
    return max(longest, offset - line_start)


def _too_long(path: Path, line: int, limits: InputLimits) -> None:
    raise InputError(f"line {line} is longer than {limits.max_line_bytes:,} bytes "
                     "(EHR_RELEASE_MAX_LINE_BYTES); is this the right file?", file=str(path))


def _check_header(path: Path, header: bytes, delimiter: str, limits: InputLimits) -> None:
    text = header.decode("utf-8", errors="replace").rstrip("\r")
    try:
        count = len(next(csv.reader(io.StringIO(text), delimiter=delimiter), []))
    except csv.Error:  # unparseable header: the parser will say so; bound it meanwhile
        count = text.count(delimiter) + 1
    check_column_count(path, count, limits)


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
