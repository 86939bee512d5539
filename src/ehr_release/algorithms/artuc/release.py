"""The published bytes: two Parquet tables, records and the generalized codes they use.

``generalized_codes.parquet`` — one row per distinct generalized code of the release:

    id  codes
    0   ["053.20", "053.71"]
    1   ["493.2"]

``records.parquet`` — one row per released record: its cluster label, one column per
configured demographic (``[low, high]`` for a numerical attribute, a hierarchy node for a
categorical one) and the ids of its generalized codes:

    cluster  age           origin   gender  generalized_codes
    C3       [19.0, 30.0]  Europe   All     [0, 1, 4]

Why two tables: a cluster's generalized codes (often hundreds of codes each) are the same on
every record of the cluster; written out per record they made 1.84 GB at 208,387 records
(issue 18). Each is written once and referenced by id.

Records carry no identifier and no per-record count: the number of codes a record lost is
not published (issue 14). Every id and every row order is a function of the published
content alone, never of the input order or of the algorithm's processing order:

* generalized codes hold their codes sorted and are numbered 0, 1, … in the sorted order of
  those lists;
* a record's ids are ascending; each cluster's records are sorted by their id lists;
  clusters are sorted by (demographics, their sorted id lists) and labelled ``C1``, ``C2``,
  … in that order, their records together.

The files are written deterministically: fixed compression, no statistics, no key-value
metadata (no pandas or Arrow schema blob), so the same clusters always give the same bytes.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ehr_release.algorithms.artuc.artuc import Anonymization

RECORDS_FILE = "records.parquet"
CODES_FILE = "generalized_codes.parquet"
#: The records column holding each record's generalized-code ids.
IDS_COLUMN = "generalized_codes"

Members = tuple[str, ...]
DemoKey = tuple[Any, ...]


def _demo_key(values: dict[str, list[float] | str]) -> DemoKey:
    return tuple((float(v[0]), float(v[1])) if isinstance(v, list) else v
                 for v in values.values())


def _clusters(anon: Anonymization) -> list[tuple[DemoKey, list[list[Members]]]]:
    """Per cluster: its demographics and, per record, the member lists of its codes."""
    names = anon.table.names
    out = []
    for cluster, gen in zip(anon.clusters, anon.codes, strict=True):
        members = {i: tuple(sorted(names[c] for c in codes)) for i, codes in gen.items.items()}
        items: list[set[int]] = [set() for _ in range(cluster.size)]
        for r, it in zip(gen.rec.tolist(), gen.item.tolist(), strict=True):
            if it >= 0:  # −1: a suppressed code, not published
                items[r].add(it)
        out.append((_demo_key(anon.space.describe(cluster.box)),
                    [[members[i] for i in its] for its in items]))
    return out


def _list(item: pa.DataType) -> pa.DataType:
    return pa.list_(pa.field("element", item, nullable=False))


def _required(columns: dict[str, pa.Array]) -> pa.Table:
    """The columns as a table whose fields are all required: no value can be null."""
    schema = pa.schema([pa.field(name, array.type, nullable=False)
                        for name, array in columns.items()])
    return pa.Table.from_arrays(list(columns.values()), schema=schema)


def write_parquet(table: pa.Table) -> bytes:
    """Parquet bytes that depend on the table alone: fixed codec and level, no statistics,
    no stored Arrow schema or other key-value metadata."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", compression_level=9, use_dictionary=True,
                   write_statistics=False, store_schema=False, version="2.6",
                   data_page_version="1.0")
    return sink.getvalue()


def release_files(anon: Anonymization) -> dict[str, bytes]:
    """Serialize an anonymization; the same clusters always give the same bytes, whatever
    the order of the input records or of the clusters."""
    clusters = _clusters(anon)
    table = sorted({g for _, records in clusters for rec in records for g in rec})
    code_id = {g: i for i, g in enumerate(table)}
    blocks = sorted((demo, sorted(sorted(code_id[g] for g in rec) for rec in records))
                    for demo, records in clusters)
    rows = [(number, demo, ids) for number, (demo, block) in enumerate(blocks, 1)
            for ids in block]
    numerical = {anon.space.attributes[i].name for i in anon.space.numerical}
    columns: dict[str, pa.Array] = {
        "cluster": pa.array([f"C{n}" for n, _, _ in rows], pa.string())}
    for j, attr in enumerate(anon.space.attributes):
        values = [demo[j] for _, demo, _ in rows]
        columns[attr.name] = (pa.array([list(v) for v in values], _list(pa.float64()))
                              if attr.name in numerical else pa.array(values, pa.string()))
    lengths = np.fromiter((len(ids) for _, _, ids in rows), dtype=np.int64, count=len(rows))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    flat = np.fromiter((i for _, _, ids in rows for i in ids), dtype=np.int32,
                       count=int(offsets[-1]))
    columns[IDS_COLUMN] = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat),
                                                   type=_list(pa.int32()))
    codes = {"id": pa.array(np.arange(len(table), dtype=np.int32)),
             "codes": pa.array([list(g) for g in table], _list(pa.string()))}
    return {RECORDS_FILE: write_parquet(_required(columns)),
            CODES_FILE: write_parquet(_required(codes))}
