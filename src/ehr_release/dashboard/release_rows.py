"""The first rows of a run's release, as the researcher will open them.

Why: Amnesia users look at the generalized records while they decide; a reviewer here saw
figures and charts but never the data she approves. The rows come only from the release's
own bytes — the parked candidate a reviewer decides on (``<home>/runs/<id>/candidate``) or
the published folder — and each file must still hash to what the database pinned for it,
so the page can never show the input, a re-drawn release or a file swapped in since.
Nothing is kept: the bytes are read for the page and dropped.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ehr_release.core.files import check_safe_name, sha256_bytes
from ehr_release.privacy.release_files import ENVELOPE
from ehr_release.storage import pending, runs
from ehr_release.storage.models import ReleaseRun
from ehr_release.storage.runs import Status

#: Rows shown per file; a longer cell is cut (the page must fit a laptop's screen).
ROWS = 10
CELL_CHARS = 160


@dataclass(frozen=True)
class FileRows:
    """One file of the release: its first rows, or why it has none to show."""

    name: str
    total: int | None  # rows in the file, when its format says
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    note: str | None = None


@dataclass(frozen=True)
class ReleaseRows:
    """Where the bytes came from (``published`` or ``candidate``) and each file's rows."""

    origin: str | None
    files: list[FileRows]
    why_none: str | None = None


def release_rows(run: ReleaseRun, limit: int = ROWS) -> ReleaseRows:
    """The first ``limit`` rows of every data file of the run's release (see module doc)."""
    located = _located(run)
    if isinstance(located, str):
        return ReleaseRows(None, [], located)
    origin, files = located
    shown = []
    for name, path, digest in files:
        try:
            data = path.read_bytes()
        except OSError:
            shown.append(FileRows(name, None, note="the file is missing"))
            continue
        if sha256_bytes(data) != digest:
            shown.append(FileRows(name, None, note="the file no longer matches the pinned "
                                                   "release: not shown"))
            continue
        shown.append(_rows_of(name, data, limit))
    return ReleaseRows(origin, shown)


def _located(run: ReleaseRun) -> tuple[str, list[tuple[str, Path, str]]] | str:
    """(origin, [(name, path, pinned sha256)]) of the release's data files, or why none."""
    if run.status == Status.PUBLISHED:
        published = [(Path(a.path).name, Path(a.path), a.sha256)
                     for a in runs.list_artifacts(run.id, "published")]
        data = [f for f in published if f[0] not in ENVELOPE]
        return ("published", data) if data else "the published release holds no data file"
    bundle = pending.get_pending(run.id)
    pinned = runs.list_artifacts(run.id, "candidate")
    if run.status != Status.AWAITING_APPROVAL and run.status != Status.APPROVED:
        return ("no release to show: it is made and verified before a reviewer sees it, "
                "and only an awaiting, approved or published run keeps it")
    if bundle is None or not pinned:
        return "the release was not parked for a reviewer"
    folder = Path(bundle.candidate_dir)
    return "candidate", [(a.path, folder / check_safe_name(a.path), a.sha256) for a in pinned
                         if a.path not in ENVELOPE]


def _rows_of(name: str, data: bytes, limit: int) -> FileRows:
    """A file's first rows by its format; a format without rows says so."""
    suffix = Path(name).suffix.lower()
    try:
        if suffix == ".parquet":
            return _parquet(name, data, limit)
        if suffix == ".csv":
            return _csv(name, data, limit)
        if suffix == ".jsonl":
            return _jsonl(name, data, limit)
    except (ValueError, OSError, UnicodeDecodeError, csv.Error) as exc:
        return FileRows(name, None, note=f"not readable as {suffix[1:]} ({type(exc).__name__})")
    return FileRows(name, None, note=f"{suffix[1:] or 'this'} file: metadata, not rows "
                    "(the datasheet describes it)")


def _parquet(name: str, data: bytes, limit: int) -> FileRows:
    import pyarrow.parquet as pq

    table = pq.ParquetFile(io.BytesIO(data))
    columns = list(table.schema_arrow.names)
    head: list[dict[str, Any]] = []
    for batch in table.iter_batches(batch_size=max(limit, 1)):
        head = batch.to_pylist()[:limit]
        break
    return FileRows(name, table.metadata.num_rows, columns,
                    [[_cell(row.get(c)) for c in columns] for row in head])


def _csv(name: str, data: bytes, limit: int) -> FileRows:
    lines = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    if not lines:
        return FileRows(name, 0)
    return FileRows(name, len(lines) - 1, lines[0], [[_cell(v) for v in row]
                                                     for row in lines[1:limit + 1]])


def _jsonl(name: str, data: bytes, limit: int) -> FileRows:
    lines = [line for line in data.decode("utf-8").splitlines() if line.strip()]
    records = [json.loads(line) for line in lines[:limit]]
    columns: list[str] = []
    for record in records:
        for key in record if isinstance(record, dict) else ["value"]:
            if key not in columns:
                columns.append(str(key))
    rows = [[_cell(r.get(c)) if isinstance(r, dict) else _cell(r) for c in columns]
            for r in records]
    return FileRows(name, len(lines), columns, rows)


def _cell(value: Any) -> str:
    """A value as the researcher's tools print it: lists and maps as compact JSON."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 1] + "…"
