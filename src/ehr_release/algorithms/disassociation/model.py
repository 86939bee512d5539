"""The published shape of a disassociated dataset and its ``release.parquet`` serialization.

Format (issue 18; the declaration with every field's review is
``ehr_release.privacy.formats.disassociation``): one long table, one row per published code,
columns ``k, m, group, size, joint, chunk, subrecord, code``. Groups are the clusters
``P1 … Pn``, then the joint clusters ``J1 … Jj``; chunk 0 is a cluster's item chunk, chunks
1, 2, … its record chunks (or a joint cluster's shared chunks). Every record chunk lists
exactly ``size`` subrecords, numbered 0 … size-1; an empty subrecord (or an empty item chunk)
is one row with a null code. Rows are sorted by (group, chunk, subrecord, code).
Subrecords are sorted code lists; their order inside a chunk is random, which is what hides
which subrecords belong together.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from ehr_release.core.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

ALGORITHM = "disassociation"
RELEASE_FILE = "release.parquet"
COLUMNS = ("k", "m", "group", "size", "joint", "chunk", "subrecord", "code")
#: One fixed writer configuration: identical releases give identical bytes.
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 3, "use_dictionary": True,
                   "write_statistics": False, "store_schema": False,
                   "row_group_size": 1 << 17}

Subrecord = tuple[str, ...]
Chunk = list[Subrecord]


@dataclass(frozen=True)
class PublishedCluster:
    """One cluster: its record chunks (``size`` subrecords each) and its item chunk."""

    id: str
    size: int
    record_chunks: list[Chunk]
    item_chunk: tuple[str, ...]


@dataclass(frozen=True)
class PublishedJointCluster:
    """Clusters sharing chunks: one subrecord per record of all member clusters."""

    clusters: tuple[str, ...]
    shared_chunks: list[Chunk]


@dataclass(frozen=True)
class DisassociatedRelease:
    """A whole disassociated dataset, as published."""

    k: int
    m: int
    clusters: list[PublishedCluster]
    joint_clusters: list[PublishedJointCluster]

    @property
    def n_records(self) -> int:
        return sum(c.size for c in self.clusters)

    def to_table(self) -> pa.Table:
        """The release as the published Arrow table (rows in the declared order).

        The loops run over groups and chunks; subrecords and codes are flattened by C-level
        iterators and numbered with NumPy (a million records: ≈ 4 million rows).
        """
        import pyarrow as pa

        joint_of = {cid: f"J{n + 1}" for n, j in enumerate(self.joint_clusters)
                    for cid in j.clusters}
        size_of = {c.id: c.size for c in self.clusters}
        labels = [c.id for c in self.clusters] + [f"J{n + 1}" for n in
                                                  range(len(self.joint_clusters))]
        sizes = [c.size for c in self.clusters] + [sum(size_of[x] for x in j.clusters)
                                                   for j in self.joint_clusters]
        joints = [joint_of.get(c.id) for c in self.clusters] + labels[len(self.clusters):]
        chunks: list[Chunk] = []          # every chunk; a cluster's item chunk is one subrecord
        numbers: list[int] = []
        per_group: list[int] = []
        for c in self.clusters:
            chunks.append([c.item_chunk])
            chunks.extend(c.record_chunks)
            numbers.extend(range(len(c.record_chunks) + 1))
            per_group.append(len(c.record_chunks) + 1)
        for j in self.joint_clusters:
            chunks.extend(j.shared_chunks)
            numbers.extend(range(1, len(j.shared_chunks) + 1))
            per_group.append(len(j.shared_chunks))
        chunk_len = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
        subs = list(chain.from_iterable(chunks))
        sub_len = np.fromiter(map(len, subs), dtype=np.int64, count=len(subs))
        rows = np.maximum(sub_len, 1)                  # an empty subrecord is one null row
        sub_group = np.repeat(np.repeat(np.arange(len(labels)), per_group), chunk_len)
        sub_pos = np.arange(len(subs)) - np.repeat(np.cumsum(chunk_len) - chunk_len, chunk_len)
        # the codes, then a null wherever a subrecord is empty
        codes = pa.array(list(chain.from_iterable(subs)), pa.string())
        first = np.cumsum(sub_len) - sub_len
        at = np.repeat(first, rows) + np.arange(int(rows.sum())) \
            - np.repeat(np.cumsum(rows) - rows, rows)
        null = np.repeat(sub_len == 0, rows)
        row_group = pa.array(np.repeat(sub_group, rows))
        return pa.table({
            "k": pa.array(np.full(len(at), self.k, dtype=np.int32)),
            "m": pa.array(np.full(len(at), self.m, dtype=np.int32)),
            "group": pa.array(labels, pa.string()).take(row_group),
            "size": pa.array(np.asarray(sizes, dtype=np.int32)).take(row_group),
            "joint": pa.array(joints, pa.string()).take(row_group),
            "chunk": pa.array(np.repeat(np.repeat(np.asarray(numbers, dtype=np.int32),
                                                  chunk_len), rows)),
            "subrecord": pa.array(np.repeat(sub_pos.astype(np.int32), rows)),
            "code": codes.take(pa.array(np.where(null, 0, at), mask=null)),
        })

    def to_bytes(self) -> bytes:
        """The exact bytes of ``release.parquet`` (deterministic: see ``PARQUET_OPTIONS``)."""
        import pyarrow.parquet as pq

        out = io.BytesIO()
        pq.write_table(self.to_table(), out, **PARQUET_OPTIONS)
        return out.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> DisassociatedRelease:
        """Load a release for reconstruction and utility (the verifier has its own reader).

        Raises
        ------
        InputError
            If the bytes are not a disassociation release.
        """
        try:
            return cls._from_table(_read_table(data))
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise InputError(f"not a disassociation release: {exc}", file=RELEASE_FILE) from None

    @classmethod
    def _from_table(cls, table: pa.Table) -> DisassociatedRelease:
        if list(table.column_names) != list(COLUMNS):
            raise ValueError("the columns are not the declared ones")
        if not len(table):
            raise ValueError("the table is empty")
        group = table["group"].to_numpy(zero_copy_only=False)
        chunk = table["chunk"].to_numpy()
        pos = table["subrecord"].to_numpy()
        new_group = np.r_[True, group[1:] != group[:-1]]
        new_chunk = new_group | np.r_[True, chunk[1:] != chunk[:-1]]
        new_sub = new_chunk | np.r_[True, pos[1:] != pos[:-1]]
        flat = table["code"].to_pylist()
        rows = np.r_[np.flatnonzero(new_sub), len(group)].tolist()
        subs = [tuple(flat[a:b]) if flat[a] is not None else ()
                for a, b in zip(rows[:-1], rows[1:], strict=True)]
        # chunk boundaries in subrecords, group boundaries in chunks
        sub_of_chunk = np.cumsum(new_sub)[new_chunk] - 1
        chunk_at = np.r_[sub_of_chunk, len(subs)].tolist()
        chunks = [subs[a:b] for a, b in zip(chunk_at[:-1], chunk_at[1:], strict=True)]
        number = chunk[new_chunk].tolist()
        g_rows = np.flatnonzero(new_group)
        chunk_of_group = (np.cumsum(new_chunk)[g_rows] - 1).tolist() + [len(chunks)]
        labels = group[g_rows].tolist()
        sizes = table["size"].to_numpy()[g_rows].tolist()
        joints = table["joint"].to_numpy(zero_copy_only=False)[g_rows].tolist()
        clusters, members, joint_chunks = [], {}, []
        for g, label in enumerate(labels):
            mine = range(chunk_of_group[g], chunk_of_group[g + 1])
            if str(label).startswith("P"):
                items = [chunks[c][0] for c in mine if number[c] == 0]
                clusters.append(PublishedCluster(label, int(sizes[g]),
                                                 [chunks[c] for c in mine if number[c] > 0],
                                                 items[0] if items else ()))
                if joints[g] is not None:
                    members.setdefault(joints[g], []).append(label)
            else:
                joint_chunks.append((label, [chunks[c] for c in mine]))
        joint_clusters = [PublishedJointCluster(tuple(members[label]), shared)
                          for label, shared in joint_chunks]
        k = int(table["k"][0].as_py())
        m = int(table["m"][0].as_py())
        return cls(k, m, clusters, joint_clusters)


def _read_table(data: bytes) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - pyarrow raises its own hierarchy
        raise ValueError(f"not a readable Parquet file ({type(exc).__name__})") from None
