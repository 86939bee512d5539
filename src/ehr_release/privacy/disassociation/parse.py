"""Reading ``release.parquet``: the published table as arrays, refused when its layout is not
the declared one.

The verifier's own reader (``ehr_release.algorithms`` has another): the columns come
straight from Arrow as NumPy arrays, string columns as dictionary indices, so no row is
turned into a Python object. Every rule of the layout (see
``ehr_release.privacy.formats.disassociation``) is checked here with vectorized comparisons
of neighbouring rows; the counts a layout cannot get wrong by construction (how many
subrecords a chunk lists, the sizes) are left to :mod:`.structure`, which reports them as
figures of the data.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

NAME = "disassociation"
RELEASE_FILE = "release.parquet"
#: The declared columns, in file order, and their Arrow types.
INT_COLUMNS = ("k", "m", "size", "chunk", "subrecord")
STR_COLUMNS = ("group", "joint", "code")
COLUMN_ORDER = ("k", "m", "group", "size", "joint", "chunk", "subrecord", "code")


class ReleaseRejected(Exception):
    """The release cannot be read as a disassociated dataset; says what and where."""


def expect(cond: bool | np.bool_, what: str) -> None:
    if not cond:
        raise ReleaseRejected(what)


@dataclass(frozen=True)
class ParsedRelease:
    """The release as arrays. Chunks are numbered globally: the clusters' record chunks in
    group order, then the joint clusters' shared chunks. Code ids index ``code_names``
    (sorted, so ids order like names); codes inside a subrecord are ascending."""

    k: int
    m: int
    cluster_ids: list[str]
    cluster_size: np.ndarray        # per cluster
    joint_of_cluster: np.ndarray    # per cluster: joint index, -1 for none
    joint_named: np.ndarray         # per cluster: joint number named (1-based), 0 for none
    joint_size: np.ndarray          # per joint cluster, as declared
    chunk_owner: np.ndarray         # per chunk: cluster index, or joint index when shared
    chunk_number: np.ndarray        # per chunk: 1, 2, … inside its group
    chunk_shared: np.ndarray        # per chunk: bool
    chunk_subrecords: np.ndarray    # per chunk: subrecords listed
    sub_chunk: np.ndarray           # per subrecord
    sub_indptr: np.ndarray
    sub_codes: np.ndarray
    item_cluster: np.ndarray
    item_code: np.ndarray
    code_names: list[str]

    @property
    def n_clusters(self) -> int:
        return len(self.cluster_ids)

    @property
    def n_joints(self) -> int:
        return len(self.joint_size)

    @property
    def n_subrecords(self) -> int:
        return len(self.sub_chunk)


def chunk_label(rel: ParsedRelease, g: int) -> str:
    """How a report names chunk ``g`` (global numbering, see :class:`ParsedRelease`)."""
    owner, number = int(rel.chunk_owner[g]), int(rel.chunk_number[g])
    if rel.chunk_shared[g]:
        return f"joint cluster {owner + 1} shared chunk {number}"
    return f"cluster {rel.cluster_ids[owner]} record chunk {number}"


def _read(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, pa.Array]]]:
    """Integer columns as arrays; each string column as per-row indices into one array of
    distinct strings (-1 for null), taken from the Parquet dictionaries."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(io.BytesIO(data), read_dictionary=list(STR_COLUMNS))
        meta = handle.metadata
        schema = handle.schema_arrow
    except Exception:  # noqa: BLE001 - pyarrow raises its own hierarchy for corrupt files
        raise ReleaseRejected(f"{RELEASE_FILE} is not a readable Parquet file") from None
    expect(tuple(schema.names) == COLUMN_ORDER,
           f"{RELEASE_FILE} does not have the declared columns {', '.join(COLUMN_ORDER)}")
    expect(not meta.metadata, f"{RELEASE_FILE} carries key-value metadata")
    for rg in range(meta.num_row_groups):
        for col in range(meta.num_columns):
            expect(not meta.row_group(rg).column(col).is_stats_set,
                   f"{RELEASE_FILE} carries column statistics")
    for name in INT_COLUMNS:
        expect(schema.field(name).type == pa.int32(), f"column {name!r} is not int32")
    for name in STR_COLUMNS:
        expect(pa.types.is_dictionary(schema.field(name).type)
               and schema.field(name).type.value_type == pa.string(),
               f"column {name!r} is not a string")
    try:
        table = handle.read()
    except Exception:  # noqa: BLE001
        raise ReleaseRejected(f"{RELEASE_FILE} is not a readable Parquet file") from None
    ints = {}
    for name in INT_COLUMNS:
        column = table[name]
        expect(column.null_count == 0, f"column {name!r} holds a null")
        ints[name] = column.to_numpy()
    return ints, {name: _dictionary_column(table[name]) for name in STR_COLUMNS}


def _dictionary_column(column: object) -> tuple[np.ndarray, pa.Array]:
    """Per-row index into the distinct strings of the column (-1 for null), and those
    strings. Each chunk has its own dictionary: all of them are numbered at once by one
    dictionary encoding of their concatenation (a million-record release has ~300,000
    labels, so no entry is turned into a Python string)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = column.chunks  # type: ignore[attr-defined]
    if not chunks:
        return np.zeros(0, dtype=np.int32), pa.array([], pa.string())
    entries = pa.concat_arrays([chunk.dictionary for chunk in chunks])
    encoded = pc.dictionary_encode(entries)
    number = pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int32)
    parts, offset = [], 0
    for chunk in chunks:
        local = np.r_[number[offset:offset + len(chunk.dictionary)], np.int32(-1)]
        parts.append(local[pc.fill_null(chunk.indices, -1).to_numpy()])
        offset += len(chunk.dictionary)
    return np.concatenate(parts), encoded.dictionary


def _numbered(labels: pa.Array, prefix: str) -> np.ndarray:
    """Per label: n if it is ``<prefix><n>`` with 1 ≤ n ≤ len(labels), else 0 (a larger n
    cannot be numbered consecutively, which :func:`parse_release` requires). ``n`` is
    written as Python writes it (ASCII digits, no sign, no leading zero), so one number has
    one spelling; the digits are read by Arrow, not label by label in Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(labels)
    number = np.zeros(n, dtype=np.int64)
    if not n:
        return number
    spelled = f"^{re.escape(prefix)}[1-9][0-9]{{0,{len(str(n)) - 1}}}$"
    ok = pc.fill_null(pc.match_substring_regex(labels, spelled), False).to_numpy(
        zero_copy_only=False)
    if ok.any():
        digits = pc.utf8_slice_codeunits(labels.filter(pa.array(ok)), len(prefix))
        number[ok] = pc.cast(digits, pa.int64()).to_numpy()
    number[number > n] = 0
    return number


def _runs(*keys: np.ndarray) -> np.ndarray:
    """True at every row where any key differs from the previous row (and at row 0)."""
    n = len(keys[0])
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for key in keys:
            new[1:] |= key[1:] != key[:-1]
    return new


def parse_release(files: dict[str, bytes]) -> ParsedRelease:
    """Read ``release.parquet``; raise :class:`ReleaseRejected` if its layout is wrong."""
    expect(RELEASE_FILE in files, f"the release has no {RELEASE_FILE}")
    ints, strs = _read(files[RELEASE_FILE])
    n = len(ints["k"])
    expect(n > 0, f"{RELEASE_FILE} has no rows")
    k_col, m_col = ints["k"], ints["m"]
    expect((k_col == k_col[0]).all() and (m_col == m_col[0]).all(),
           "k and m are not the same on every row")

    # groups: P1 … Pn, then J1 … Jj, each a contiguous run of rows
    g_index, g_dict = strs["group"]
    expect((g_index >= 0).all(), "a row has no group")
    label_p, label_j = _numbered(g_dict, "P"), _numbered(g_dict, "J")  # per distinct label
    number = np.maximum(label_p, label_j).astype(np.int32)[g_index]   # one is 0
    expect((number > 0).all(), "group labels are not P1, P2, … then J1, J2, …")
    is_joint = (label_j > 0)[g_index]
    new_group = _runs(number, is_joint)
    g_start = np.flatnonzero(new_group)
    g_joint = is_joint[g_start]
    expect(not (g_joint[:-1] & ~g_joint[1:]).any(), "a cluster's rows follow a joint cluster's")
    g_number = number[g_start]
    n_clusters = int((~g_joint).sum())
    expect((g_number == np.r_[np.arange(1, n_clusters + 1),
                              np.arange(1, len(g_start) - n_clusters + 1)]).all(),
           "groups are not P1, P2, … then J1, J2, …, each in one run of rows")

    # size and joint: one value per group; a cluster names a joint cluster, which names itself
    size = ints["size"]
    same = ~new_group[1:]
    expect(not (same & (size[1:] != size[:-1])).any(), "a group's size differs between rows")
    jt_index, jt_dict = strs["joint"]
    jt_num = np.r_[_numbered(jt_dict, "J").astype(np.int32), np.int32(0)][jt_index]
    expect(not ((jt_index >= 0) & (jt_num == 0)).any(), "a joint label is not J1, J2, …")
    expect(not (same & (jt_num[1:] != jt_num[:-1])).any(),
           "a group's joint cluster differs between rows")
    expect((jt_num[is_joint] == number[is_joint]).all(),
           "a joint cluster's rows do not name the joint cluster itself")

    # chunks: 0 (a cluster's item chunk, subrecord 0), then 1, 2, … in order
    chunk, sub = ints["chunk"], ints["subrecord"]
    new_chunk = new_group | _runs(chunk)
    c_start = np.flatnonzero(new_chunk)
    first_expected = np.where(is_joint[c_start], 1, 0)
    step_ok = np.where(new_group[c_start], chunk[c_start] == first_expected,
                       chunk[c_start] == np.r_[0, chunk[c_start[:-1]]] + 1)
    expect(step_ok.all(), "chunks are not numbered 0 (item chunk), 1, 2, … in each group")
    item = (chunk == 0) & ~is_joint
    expect((sub[item] == 0).all(), "an item-chunk row has a subrecord other than 0")

    # subrecords: 0, 1, … in each chunk; codes ascending and distinct in each subrecord
    new_sub = new_chunk | _runs(sub)
    s_start = np.flatnonzero(new_sub)
    sub_ok = np.where(new_chunk[s_start], sub[s_start] == 0,
                      sub[s_start] == np.r_[0, sub[s_start[:-1]]] + 1)
    expect(sub_ok.all(), "subrecords are not numbered 0, 1, … in each chunk")
    c_index, c_entries = strs["code"]
    c_dict = c_entries.to_pylist()  # distinct codes: a few hundred or thousand
    code_names = sorted(c_dict)
    rank_of = {name: i for i, name in enumerate(code_names)}
    rank = np.array([*(rank_of[x] for x in c_dict), -1], dtype=np.int32)[c_index]
    null = c_index < 0
    inside = ~new_sub[1:]
    expect(not (inside & null[:-1]).any(), "a null code shares a subrecord with a code")
    expect(not (inside & (rank[1:] <= rank[:-1])).any(),
           "codes are not sorted and distinct inside a subrecord or item chunk")

    # the arrays the checks read
    cluster_rows = g_start[~g_joint]
    joint_rows = g_start[g_joint]
    jt_of_group = jt_num[g_start].astype(np.int64)
    joint_named = jt_of_group[~g_joint]
    n_joints = len(joint_rows)
    rec = ~item
    sub_rows = s_start[rec[s_start]]
    chunk_rows = c_start[rec[c_start]]
    # a record chunk's first row starts a subrecord: counting them numbers the chunks
    sub_chunk = np.cumsum(new_chunk[sub_rows]) - 1
    # a null code is alone in its subrecord (checked above): it is an empty subrecord
    sub_end = np.r_[s_start[1:], n][rec[s_start]]
    sub_indptr = np.r_[0, np.cumsum(sub_end - sub_rows - null[sub_rows])]
    chunk_group = np.searchsorted(g_start, chunk_rows, "right") - 1
    shared = g_joint[chunk_group]
    owner = np.where(shared, chunk_group - n_clusters, chunk_group)
    # each cluster's first chunk is its item chunk (checked above): its rows but a null one
    item_start = c_start[np.flatnonzero(new_group[c_start])[:n_clusters]]
    item_end = np.r_[c_start, n][np.flatnonzero(new_group[c_start])[:n_clusters] + 1]
    item_count = item_end - item_start - null[item_start]
    return ParsedRelease(
        k=int(k_col[0]), m=int(m_col[0]),
        cluster_ids=[f"P{i}" for i in range(1, n_clusters + 1)],
        cluster_size=size[cluster_rows].astype(np.int64),
        joint_of_cluster=np.where((joint_named >= 1) & (joint_named <= n_joints),
                                  joint_named - 1, -1),
        joint_named=joint_named, joint_size=size[joint_rows].astype(np.int64),
        chunk_owner=owner, chunk_number=chunk[chunk_rows].astype(np.int64), chunk_shared=shared,
        chunk_subrecords=np.bincount(sub_chunk, minlength=len(chunk_rows)).astype(np.int64),
        sub_chunk=sub_chunk, sub_indptr=sub_indptr,
        sub_codes=rank[rec & ~null].astype(np.int64),
        item_cluster=np.repeat(np.arange(n_clusters, dtype=np.int64), item_count),
        item_code=rank[item & ~null].astype(np.int64), code_names=code_names)
