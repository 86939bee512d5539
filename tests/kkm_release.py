"""Tests' own reading and writing of the (k, k^m) Parquet release, one record as a dict.

A record is ``{"cluster": "C3", "demographics": {"age": [19, 30], ...}, "codes":
[["053.20", "053.71"], ["493.2"]]}`` — the shape the JSON Lines format had, so tests keep
planting fields and tampering with records as before. :func:`to_files` writes records in the
order given (a test can plant an unsorted order); ``canonical=True`` puts them in the
documented order first and relabels the clusters. Written with pandas/pyarrow here, not with
the anonymizer's writer, so a writer bug cannot hide in both.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import pyarrow as pa

from ehr_release.privacy.canonical_parquet import render
from ehr_release.privacy.formats.kkm import RENDERING

RECORDS, CODES, IDS = "records.parquet", "generalized_codes.parquet", "generalized_codes"


def read_records(files: dict[str, bytes]) -> list[dict[str, Any]]:
    """Every record of a release as a dict, in row order (one pandas call per table)."""
    table = pd.read_parquet(io.BytesIO(files[CODES]))
    members = {int(i): [str(c) for c in cs] for i, cs in zip(table["id"], table["codes"],
                                                              strict=True)}
    frame = pd.read_parquet(io.BytesIO(files[RECORDS]))
    names = [c for c in frame.columns if c not in ("cluster", IDS)]
    out = []
    for row in frame.itertuples(index=False):
        values = dict(zip(frame.columns, row, strict=True))
        demo = {n: ([_num(x) for x in values[n]] if not isinstance(values[n], str)
                    else values[n]) for n in names}
        out.append({"cluster": values["cluster"], "demographics": demo,
                    "codes": [members[int(i)] for i in values[IDS]]})
    return out


def _num(x: Any) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _key(record: dict[str, Any], code_id: dict[tuple[str, ...], int]) -> list[int]:
    return sorted(code_id[tuple(sorted(g))] for g in record["codes"])


def _demo_key(record: dict[str, Any]) -> tuple:
    return tuple(tuple(map(float, v)) if isinstance(v, list) else v
                 for v in record["demographics"].values())


def to_files(records: list[dict[str, Any]], *, canonical: bool = False,
             extra_codes: list[list[str]] = ()) -> dict[str, bytes]:
    """A release holding ``records`` (and ``extra_codes``, unused code-table entries)."""
    table = sorted({tuple(sorted(g)) for r in records for g in r["codes"]}
                   | {tuple(sorted(g)) for g in extra_codes})
    code_id = {g: i for i, g in enumerate(table)}
    if canonical:
        by_cluster: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            by_cluster.setdefault(r["cluster"], []).append(r)
        blocks = sorted((_demo_key(rs[0]), sorted(_key(r, code_id) for r in rs), label)
                        for label, rs in by_cluster.items())
        ordered = []
        for number, (_, _, label) in enumerate(blocks, 1):
            rs = sorted(by_cluster[label], key=lambda r: _key(r, code_id))
            ordered += [{**r, "cluster": f"C{number}"} for r in rs]
        records = ordered
    names = list(records[0]["demographics"]) if records else []
    columns: dict[str, Any] = {"cluster": pa.array([r["cluster"] for r in records],
                                                   pa.string())}
    for n in names:
        values = [r["demographics"][n] for r in records]
        columns[n] = (pa.array([[float(x) for x in v] for v in values], pa.list_(pa.float64()))
                      if isinstance(values[0], list) else pa.array(values))
    for r in records:  # planted extra top-level fields become columns
        for key in r:
            if key not in ("cluster", "demographics", "codes") and key not in columns:
                columns[key] = pa.array([x.get(key) for x in records])
    columns[IDS] = pa.array([_key(r, code_id) for r in records], pa.list_(pa.int32()))
    codes = pa.table({"id": pa.array(range(len(table)), pa.int32()),
                      "codes": pa.array([list(g) for g in table], pa.list_(pa.string()))})
    return {RECORDS: _bytes(pa.table(columns)), CODES: _bytes(codes)}


def _bytes(table: pa.Table) -> bytes:
    """The table as the verifier's declared rendering (the closed world refuses others)."""
    return render(table, RENDERING)
