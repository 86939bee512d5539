"""A Parquet file must be exactly its declared writer's rendering of the table it holds.

Reading a Parquet file looks only where its footer points: bytes between the column chunks
and the footer, row-group boundaries, per-column codecs, statistics, page indexes or the
content of a declared key-value note (the ``pandas`` and ``ARROW:schema`` blobs) are never
seen by a reader of the columns, so a shape check of names, types and nulls says nothing
about them — yet a researcher receives them. A writer could put a patient's record before
the footer, or cut row groups at sizes that spell a true count, and every column would still
read the same. So, as for JSON (:mod:`.canonical_bytes`), each Parquet file declares its
:class:`ParquetRendering` and the closed world requires the bytes to equal that rendering of
the columns they hold, stripped of every note.

The comparison is exact: a release written by another pyarrow or pandas version (whose
``created_by`` note or codec output differs) fails closed and is re-verified in the version
that wrote it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class ParquetRendering:
    """How a file's writer renders its table: ``pyarrow.parquet.write_table``'s ``options``,
    or, with ``via_pandas``, ``DataFrame.to_parquet(index=False)`` with pandas' defaults
    (which add the ``pandas`` and ``ARROW:schema`` notes, rendered from the columns)."""

    options: tuple[tuple[str, Any], ...] = ()
    via_pandas: bool = False

    def words(self) -> str:
        """The rendering as the call that produces it, for the format documentation."""
        if self.via_pandas:
            return "`DataFrame.to_parquet(index=False)` of its columns (pandas' defaults)"
        options = ", ".join(f"{k}={v!r}" for k, v in self.options)
        return f"`pyarrow.parquet.write_table(table, {options})` of its columns, no metadata"


def _plain(table: pa.Table) -> pa.Table:
    """The columns alone: names, types, nullability; no schema or field metadata."""
    import pyarrow as pa

    schema = pa.schema([pa.field(f.name, f.type, f.nullable) for f in table.schema])
    return pa.Table.from_arrays(table.columns, schema=schema)


def render(table: pa.Table, rendering: ParquetRendering) -> bytes:
    """The declared rendering of ``table``'s columns."""
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    if rendering.via_pandas:
        _plain(table).to_pandas().to_parquet(sink, index=False)
    else:
        pq.write_table(_plain(table), sink, **dict(rendering.options))
    return sink.getvalue()


def parquet_problem(data: bytes, table: pa.Table, rendering: ParquetRendering) -> str | None:
    """None if ``data`` is exactly the rendering of ``table`` (read from it), else where the
    bytes depart — never what they hold there."""
    if render(table, rendering) == data:
        return None
    return ("is not the declared writer's rendering of its columns (bytes outside the "
            "columns, row groups, codecs, statistics or metadata differ)")
