"""Check that no release file carries a source patient id (a direct identifier).

Run on every release, whatever the algorithm, on top of the algorithm's own verifier: the
releases that publish per-patient records must carry pseudonyms, and the others no ids at
all. It reads the bytes itself (JSON, JSON Lines, CSV headers, Parquet columns) rather than
trusting which files an algorithm declares, so a new algorithm that starts writing ids is
caught here too.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ehr_release.model.reports import Requirement

ID_FIELD = "patient_id"


def _ids_in_json(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == ID_FIELD and isinstance(item, str | int):
                yield str(item)
            else:
                yield from _ids_in_json(item)
    elif isinstance(value, list):
        for item in value:
            yield from _ids_in_json(item)


def _ids_in_file(name: str, data: bytes) -> Iterator[str]:
    if name.endswith(".parquet"):
        yield from _ids_in_parquet(data)
        return
    # Cheap: most release files hold no such field. A JSON key may be written with escapes
    # ("patient\\u005fid"), so only a file with neither the name nor any escape is skipped.
    if ID_FIELD.encode() not in data and b"\\u" not in data:
        return
    text = data.decode("utf-8", errors="replace")
    if name.endswith(".jsonl"):
        for line in text.split("\n"):  # not splitlines: U+2028 may stand inside a string
            if line.strip():
                yield from _ids_in_json(json.loads(line))
    elif name.endswith(".json"):
        yield from _ids_in_json(json.loads(text))
    elif name.endswith(".csv"):
        rows = csv.DictReader(io.StringIO(text))
        if rows.fieldnames and ID_FIELD in rows.fieldnames:
            yield from (row[ID_FIELD] for row in rows)


def _ids_in_parquet(data: bytes) -> Iterator[str]:
    """The values of a ``patient_id`` column, or of a ``patient_id`` field nested in a
    column's structs (read as JSON would be)."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(io.BytesIO(data))
    columns = [f.name for f in schema if f.name == ID_FIELD or ID_FIELD in str(f.type)]
    if not columns:
        return
    table = pq.read_table(io.BytesIO(data), columns=columns)
    for name, column in zip(table.column_names, table.columns, strict=True):
        yield from _ids_in_json([{name: value} for value in column.to_pylist()])


def source_ids_requirement(files: Mapping[str, bytes], source_ids: Iterable[str]) -> Requirement:
    """'No source patient id appears as a patient id in the release', measured."""
    released = {pid for name, data in sorted(files.items()) for pid in _ids_in_file(name, data)}
    # Only releases that carry ids pay for the set of (up to millions of) source ids.
    leaked = sorted(released.intersection(map(str, source_ids))) if released else []
    if released:
        measured = (f"{len(leaked):,} of {len(released):,} released ids are source ids"
                    if leaked else f"{len(released):,} release-specific pseudonyms, none a "
                    "source id")
    else:
        measured = "the release carries no patient ids"
    return Requirement(
        name="direct identifiers removed",
        required="no source patient id in the release (records carry release-specific "
                 "pseudonyms)",
        measured=measured, passed=not leaked,
        evidence={"leaked": len(leaked)})  # never the ids: evidence is shown to reviewers
