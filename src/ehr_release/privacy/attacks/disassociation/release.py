"""Reading ``release.parquet`` as the attacker does: strictly, numbering its codes with the
original's. Whatever the file holds beyond the declared layout (a column, metadata,
statistics, an order, a per-group value that varies) is :class:`Unbounded`: the attack
assumes it singles a record out."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

RELEASE_FILE = "release.parquet"
COLUMNS = ("k", "m", "group", "size", "joint", "chunk", "subrecord", "code")
STR_COLUMNS = ("group", "joint", "code")


class Unreadable(ValueError):
    """The bytes are not a disassociated release this attack can read (say why, no value)."""


class Unbounded(ValueError):
    """A published detail the attacker cannot interpret: assumed to single a record out."""


@dataclass(frozen=True)
class Release:
    """The release over one integer code numbering (codes sorted, so ids order like names).

    Units are chunks: record chunks (owned by a cluster) and shared chunks (owned by a joint
    cluster). ``sub_*`` describe every subrecord: its unit, its position there and its codes
    (CSR). ``pos_of_sub`` is the record position a positional reading gives it.
    """

    names: list[str]
    n_codes: int
    size: np.ndarray            # per cluster
    joint_of: np.ndarray        # per cluster: joint index or -1
    item_indptr: np.ndarray     # per cluster: its item-chunk code ids (CSR over item_codes)
    item_codes: np.ndarray
    unit_owner: np.ndarray      # per unit: cluster (record chunk) or joint (shared chunk)
    unit_shared: np.ndarray     # per unit: bool
    sub_unit: np.ndarray
    sub_pos: np.ndarray
    sub_indptr: np.ndarray
    sub_codes: np.ndarray
    base: np.ndarray            # per cluster: first global position
    member_indptr: np.ndarray   # per joint cluster: its member clusters (CSR over members)
    members: np.ndarray

    @property
    def n_joints(self) -> int:
        return len(self.member_indptr) - 1

    def items_of(self, p: int) -> np.ndarray:
        """Cluster ``p``'s item-chunk code ids."""
        return self.item_codes[self.item_indptr[p]:self.item_indptr[p + 1]]

    def members_of(self, j: int) -> np.ndarray:
        """Joint cluster ``j``'s member clusters, ascending."""
        return self.members[self.member_indptr[j]:self.member_indptr[j + 1]]


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise Unreadable(what)


def _columns(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, list[str]]]]:
    """The table's integer columns, and each string column as per-row ids (-1 for null) into
    its distinct values; whatever the file holds beyond the declared columns is refused."""
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(io.BytesIO(data), read_dictionary=list(STR_COLUMNS))
        names = list(handle.schema_arrow.names)
        meta = handle.metadata
    except Exception:  # noqa: BLE001 - pyarrow raises its own hierarchy for corrupt files
        raise Unreadable(f"{RELEASE_FILE} is not a readable Parquet file") from None
    if set(names) - set(COLUMNS):
        raise Unbounded("the release holds an undeclared column")
    _require(names == list(COLUMNS), "the release lacks a declared column")
    if meta.metadata:
        raise Unbounded("the release file carries key-value metadata")
    if any(meta.row_group(g).column(i).is_stats_set for g in range(meta.num_row_groups)
           for i in range(meta.num_columns)):
        raise Unbounded("the release file carries column statistics")
    try:
        table = handle.read()
        ints = {n: table[n].to_numpy() for n in COLUMNS if n not in STR_COLUMNS}
    except Exception:  # noqa: BLE001 - nulls or a type pyarrow cannot turn into integers
        raise Unreadable("an integer column is not integers without nulls") from None
    strs = {}
    for name in STR_COLUMNS:
        chunks = table[name].chunks
        for chunk in chunks:
            _require(hasattr(chunk, "dictionary"), f"column {name} is not text")
        strs[name] = _text_ids(chunks)
    return ints, strs


def _text_ids(chunks: list) -> tuple[np.ndarray, list[str]]:
    """Per row, the id of its text among the column's distinct texts (numbered in order of
    first appearance across the chunks' dictionaries; -1 for null), and those texts.

    Text dictionaries are numbered by Arrow in one pass (a million-record release has
    ~300,000 group labels); anything else (a dictionary of numbers, a null entry) is read
    entry by entry, each entry as its ``str``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not chunks:
        return np.zeros(0, np.int64), []
    dictionaries = [chunk.dictionary for chunk in chunks]
    if all(pa.types.is_string(d.type) or pa.types.is_large_string(d.type) for d in dictionaries) \
            and not any(d.null_count for d in dictionaries):
        entries = pa.concat_arrays([d.cast(pa.large_string()) for d in dictionaries])
        encoded = pc.dictionary_encode(entries)
        number = encoded.indices.to_numpy().astype(np.int64)
        values = encoded.dictionary.to_pylist()
    else:
        seen: dict[str, int] = {}
        number = np.array([seen.setdefault(str(x), len(seen)) for d in dictionaries
                           for x in d.to_pylist()], dtype=np.int64)
        values = list(seen)
    parts, offset = [], 0
    for chunk, d in zip(chunks, dictionaries, strict=True):
        local = np.r_[number[offset:offset + len(d)], np.int64(-1)]
        parts.append(local[chunk.indices.fill_null(-1).to_numpy()])
        offset += len(d)
    return np.concatenate(parts), values


def _changes(*keys: np.ndarray) -> np.ndarray:
    """True where a row differs from the previous one in some key (and at row 0)."""
    out = np.zeros(len(keys[0]), dtype=bool)
    if len(out):
        out[0] = True
        for key in keys:
            out[1:] |= key[1:] != key[:-1]
    return out


def read_release(data: bytes, original_codes: list[str]) -> Release:
    """Read ``release.parquet`` and number its codes together with the original's."""
    ints, strs = _columns(data)
    _require(len(ints["k"]) > 0, "the release has no rows")
    gid, glabels = strs["group"]
    _require(bool((gid >= 0).all()), "a row has no group")
    new_group = _changes(gid)
    starts = np.flatnonzero(new_group)
    labels = [glabels[i] for i in gid[starts].tolist()]
    n_clusters = sum(1 for x in labels if x[:1] == "P")
    expected = [f"P{i}" for i in range(1, n_clusters + 1)] + \
        [f"J{i}" for i in range(1, len(labels) - n_clusters + 1)]
    _require(labels == expected, "groups are not P1, P2, … then J1, J2, …, one run each")
    group = np.cumsum(new_group) - 1
    chunk, pos, size_col = ints["chunk"], ints["subrecord"], ints["size"]
    jid, jlabels = strs["joint"]
    inside = ~new_group[1:]
    for col in (size_col, jid, ints["k"], ints["m"]):
        if (inside & (col[1:] != col[:-1])).any():
            raise Unbounded("a value that is one per group differs between its rows")
    # the declared order: group, chunk, subrecord (consecutive from 0), then code
    new_chunk = new_group | _changes(chunk)
    new_sub = new_chunk | _changes(pos)
    c_at, s_at = np.flatnonzero(new_chunk), np.flatnonzero(new_sub)
    shared_row = group >= n_clusters
    first_chunk = np.where(shared_row[c_at], 1, 0)
    prev_chunk = np.r_[0, chunk[c_at[:-1]]] + 1
    prev_pos = np.r_[0, pos[s_at[:-1]]] + 1
    if not (np.where(new_group[c_at], chunk[c_at] == first_chunk, chunk[c_at] == prev_chunk)
            .all() and np.where(new_chunk[s_at], pos[s_at] == 0, pos[s_at] == prev_pos).all()
            and (pos[(chunk == 0)] == 0).all()):
        raise Unbounded("the rows are not in the declared order")
    cid, cnames = strs["code"]
    names = sorted(set(cnames).union(original_codes))
    index = {name: i for i, name in enumerate(names)}
    code = np.r_[np.fromiter(map(index.__getitem__, cnames), dtype=np.int64,
                             count=len(cnames)), -1][cid]
    same_sub = ~new_sub[1:]
    if (same_sub & ((code[1:] <= code[:-1]) | (code[:-1] < 0))).any():
        raise Unbounded("a subrecord lists its codes in a non-canonical order")
    # clusters, joint clusters and their members
    size = size_col[starts[:n_clusters]].astype(np.int64)
    number = {f"J{i}": i - 1 for i in range(1, len(labels) - n_clusters + 1)}
    named = [jlabels[i] if i >= 0 else None for i in jid[starts].tolist()]
    _require(all(x == labels[g] for g, x in enumerate(named) if g >= n_clusters),
             "a joint cluster does not name itself")
    joint_of = np.array([number.get(x, -2) if x is not None else -1
                         for x in named[:n_clusters]], dtype=np.int64).reshape(n_clusters)
    _require(bool((joint_of >= -1).all()), "a cluster names an unknown joint cluster")
    in_joint = joint_of >= 0
    members = np.flatnonzero(in_joint)[np.argsort(joint_of[in_joint], kind="stable")]
    per_joint = np.bincount(joint_of[in_joint], minlength=len(number))
    member_indptr = np.r_[0, np.cumsum(per_joint)].astype(np.int64)
    summed = np.r_[0, np.cumsum(size[members])]
    joint_size = summed[member_indptr[1:]] - summed[member_indptr[:-1]]
    # units (record and shared chunks) and their subrecords; item chunks apart
    item = (chunk == 0) & ~shared_row
    rec = ~item
    unit_rows = c_at[rec[c_at]]
    unit_group = group[unit_rows]
    unit_shared = unit_group >= n_clusters
    unit_owner = np.where(unit_shared, unit_group - n_clusters, unit_group)
    sub_rows = s_at[rec[s_at]]
    sub_unit = (np.cumsum(new_chunk[rec]) - 1)[new_sub[rec]]
    unit_len = np.where(unit_shared, joint_size[np.where(unit_shared, unit_owner, 0)]
                        if len(joint_size) else 0, size[np.where(unit_shared, 0, unit_owner)])
    _require(bool((np.bincount(sub_unit, minlength=len(unit_rows)) == unit_len).all()),
             "a chunk does not list one subrecord per record")
    held = rec & (code >= 0)
    lengths = np.bincount(np.cumsum(new_sub[rec]) - 1, weights=(code >= 0)[rec],
                          minlength=len(sub_rows)).astype(np.int64)
    sub_indptr = np.zeros(len(sub_rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=sub_indptr[1:])
    item_rows = item & (code >= 0)
    n_items = np.bincount(group[item_rows], minlength=n_clusters)
    item_indptr = np.r_[0, np.cumsum(n_items)].astype(np.int64)
    base = np.cumsum(size) - size
    return Release(names, len(names), size, joint_of, item_indptr, code[item_rows],
                   unit_owner.astype(np.int64), unit_shared, sub_unit.astype(np.int64),
                   pos[sub_rows].astype(np.int64), sub_indptr, code[held], base,
                   member_indptr, members.astype(np.int64))

