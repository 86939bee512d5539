"""Reading a (k, k^m) release for its verifier: ``records.parquet`` and
``generalized_codes.parquet`` parsed into released records (generalized demographics, code
sets, cluster) with pyarrow, refusing a malformed file by name (never by value). The checks
in :mod:`.kkm` and :mod:`.kkm_truth` work on what this returns.
"""

from __future__ import annotations

import io
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ehr_release.configuration.constraints import (
    NumericalAttribute,
    RTConfig,
)
from ehr_release.privacy.closed_world import undeclared

RELEASE_FILE = "records.parquet"


CODES_FILE = "generalized_codes.parquet"


IDS_COLUMN = "generalized_codes"


_TOL = 1e-9


DemoKey = tuple[Hashable, ...]


Items = frozenset[frozenset[str]]


class Malformed(Exception):
    """The release cannot be read as the documented Parquet tables."""


@dataclass(frozen=True)
class Released:
    """One parsed released record."""

    line: int  # the row, 1-based
    cluster: str
    demo: DemoKey
    items: Items
    ids: tuple[int, ...] = ()


# --------------------------------------------------------------------------- parsing
def _table(files: Mapping[str, bytes], name: str) -> pa.Table:
    if name not in files:
        raise Malformed(f"the release has no {name}")
    try:
        return pq.read_table(io.BytesIO(files[name]))
    except Exception:  # noqa: BLE001 - the message could quote bytes of the file
        raise Malformed(f"{name} is not a readable Parquet file") from None


def _lists(column: pa.ChunkedArray, what: str) -> tuple[np.ndarray, pa.Array]:
    """A list column's offsets (NumPy) and flat values; nulls refused."""
    array = column.combine_chunks()
    if not pa.types.is_list(array.type) or array.null_count or array.values.null_count:
        raise Malformed(f"{what} must be lists without nulls")
    values = array.values.slice(array.offsets[0].as_py(),
                                array.offsets[-1].as_py() - array.offsets[0].as_py())
    offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return offsets - offsets[0], values


def _code_table(files: Mapping[str, bytes]) -> list[frozenset[str]]:
    """The generalized codes by id: ids 0, 1, … in row order, each list non-empty, sorted,
    without repeats, rows strictly sorted by list (so ids follow the published content)."""
    table = _table(files, CODES_FILE)
    if table.column_names != ["id", "codes"]:
        raise Malformed(f"{CODES_FILE} must have the columns id, codes")
    ids = table.column("id")
    if not pa.types.is_integer(ids.type) or ids.null_count or not np.array_equal(
            ids.to_numpy(), np.arange(table.num_rows)):
        raise Malformed(f"{CODES_FILE}: ids must be 0, 1, … in row order")
    offsets, values = _lists(table.column("codes"), f"{CODES_FILE} codes")
    if not pa.types.is_string(values.type):
        raise Malformed(f"{CODES_FILE}: codes must be lists of text")
    flat = values.to_pylist()
    members = [tuple(flat[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    for no, g in enumerate(members):
        if not g or any(x >= y for x, y in zip(g, g[1:], strict=False)):
            raise Malformed(f"{CODES_FILE} row {no + 1}: codes must be non-empty, sorted and "
                            "distinct")
        if no and members[no - 1] >= g:
            raise Malformed(f"{CODES_FILE} row {no + 1}: rows must be in the sorted order of "
                            "their codes, each list once")
    return [frozenset(g) for g in members]


def _demographic_keys(table: pa.Table, config: RTConfig) -> list[DemoKey]:
    """Each row's generalized demographics, every value checked against the configuration."""
    n = table.num_rows
    columns: list[list[Hashable]] = []
    for attr in config.attributes:
        column = table.column(attr.name)
        if isinstance(attr, NumericalAttribute):
            offsets, values = _lists(column, f"{attr.name}")
            if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
                raise Malformed(f"{attr.name} must be [low, high] inside {attr.domain}")
            bounds = values.to_numpy(zero_copy_only=False).astype(np.float64)
            if not np.all(np.diff(offsets) == 2):
                raise Malformed(f"{attr.name} must be [low, high] inside {attr.domain}")
            low, high = bounds[0::2], bounds[1::2]
            bad = ~((attr.domain.low <= low) & (low <= high) & (high <= attr.domain.high))
            if bad.any():
                raise Malformed(f"row {int(np.flatnonzero(bad)[0]) + 1}: {attr.name} must be "
                                f"[low, high] inside {attr.domain}")
            columns.append(list(zip(low.tolist(), high.tolist(), strict=True)))
        else:
            if not pa.types.is_string(column.type) or column.null_count:
                raise Malformed(f"{attr.name} must be a node of its hierarchy")
            nodes = column.to_pylist()
            for value in set(nodes):
                if value not in attr.hierarchy:
                    raise Malformed(f"row {nodes.index(value) + 1}: {attr.name} is not a "
                                    "node of its hierarchy")  # the value is not repeated
            columns.append(nodes)
    return list(zip(*columns, strict=True)) if columns else [()] * n


def parse_release(files: Mapping[str, bytes], config: RTConfig) -> list[Released]:
    """Read and check both tables; :class:`Malformed` names the first bad row or column.

    Identical records share one ``items`` object, and every generalized code is one
    frozenset shared by all records showing it: a cluster repeats its generalized codes on
    every record (hundreds of codes each), and a fresh set per record took 7 GB for 62,516
    records.
    """
    entries = _code_table(files)
    table = _table(files, RELEASE_FILE)
    expected = ["cluster", *config.names, IDS_COLUMN]
    extra = [c for c in table.column_names if c not in expected]
    if extra:
        raise Malformed(undeclared("column", table.column_names, expected))
    if table.column_names != expected:
        raise Malformed(f"columns must be {', '.join(expected)} in this order")
    labels = table.column("cluster")
    if not pa.types.is_string(labels.type) or labels.null_count:
        raise Malformed("cluster must be text")
    offsets, values = _lists(table.column(IDS_COLUMN), IDS_COLUMN)
    if not pa.types.is_integer(values.type):
        raise Malformed(f"{IDS_COLUMN} must be lists of ids")
    ids = values.to_numpy(zero_copy_only=False).astype(np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= len(entries)):
        row = int(np.searchsorted(offsets, np.flatnonzero((ids < 0) | (ids >= len(entries)))[0],
                                  side="right"))
        raise Malformed(f"row {row}: an id of {IDS_COLUMN} is not in {CODES_FILE}")
    step = np.diff(ids)
    inside = np.ones(len(step), dtype=bool)
    cuts = offsets[1:-1]
    inside[cuts[(cuts > 0) & (cuts < len(ids))] - 1] = False  # a step across rows: no test
    if np.any(inside & (step <= 0)):
        row = int(np.searchsorted(offsets, np.flatnonzero(inside & (step <= 0))[0],
                                  side="right"))
        raise Malformed(f"row {row}: {IDS_COLUMN} must be ascending, each id once")
    unused = np.bincount(ids, minlength=len(entries)) == 0
    if unused.any():
        raise Malformed(f"{CODES_FILE} row {int(np.flatnonzero(unused)[0]) + 1}: a generalized "
                        "code no record shows")
    demos = _demographic_keys(table, config)
    shared: dict[bytes, Items] = {}
    out: list[Released] = []
    for number, (label, demo) in enumerate(zip(labels.to_pylist(), demos, strict=True)):
        row = ids[offsets[number]:offsets[number + 1]]
        key = row.tobytes()
        items = shared.get(key)
        if items is None:
            items = shared[key] = frozenset(entries[i] for i in row.tolist())
            flat = [c for g in items for c in g]
            if len(set(flat)) != len(flat):
                raise Malformed(f"row {number + 1}: a code appears twice in the record's "
                                "generalized codes")
        out.append(Released(number + 1, label, demo, items, tuple(row.tolist())))
    _check_order(out)
    return out


def _check_order(records: list[Released]) -> None:
    """The documented row order: clusters C1, C2, … in turn, each cluster's rows sorted by
    their ids, clusters sorted by (demographics, their rows' ids)."""
    blocks: list[tuple[DemoKey, list[tuple[int, ...]]]] = []
    for r in records:
        if not blocks or r.cluster != f"C{len(blocks)}":
            if r.cluster != f"C{len(blocks) + 1}":
                raise Malformed(f"row {r.line}: clusters must be labelled C1, C2, … in row "
                                "order, each cluster's rows together")
            blocks.append((r.demo, []))
        rows = blocks[-1][1]
        if rows and rows[-1] > r.ids:
            raise Malformed(f"row {r.line}: a cluster's rows must be sorted by their ids")
        rows.append(r.ids)
    for i in range(1, len(blocks)):
        if blocks[i - 1] > blocks[i]:
            raise Malformed(f"cluster C{i + 1}: clusters must be sorted by demographics, "
                            "then by their rows' ids")
