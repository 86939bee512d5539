"""``Disassociation(D, k, m, U)``: HorPart, VerPart per cluster, Refine, shuffle, publish.

VerPart is independent per cluster, so it runs over batches of clusters through a
caller-supplied ``map_batches`` (the registry hands in the flow's task runner; the default is
a plain in-process loop). Nothing is random: the order of subrecords inside each chunk — the
one choice the model leaves free — follows the documented rule of :mod:`.order`, which the
verifier replays (issue 32). ``rng`` is kept in the signature for callers and draws nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from ehr_release.algorithms.disassociation.encoding import EncodedRecords
from ehr_release.algorithms.disassociation.horpart import horpart
from ehr_release.algorithms.disassociation.model import (
    Chunk,
    DisassociatedRelease,
    PublishedCluster,
    PublishedJointCluster,
)
from ehr_release.algorithms.disassociation.order import ordered_chunk
from ehr_release.algorithms.disassociation.refine import ClusterChunks, Unit, refine
from ehr_release.algorithms.disassociation.verpart import Row, single_chunk_clusters, verpart
from ehr_release.core.errors import ParameterError

VerPartResult = tuple[list[list[int]], dict[int, int]]
Batch = list[list[Row]]
#: ``map_batches(fn, batches)`` must return ``[fn(b) for b in batches]`` (in order).
MapBatches = Callable[[Callable[[Batch], list[VerPartResult]], list[Batch]],
                      list[list[VerPartResult]]]
#: Clusters per VerPart batch: large enough that scheduling a batch costs little.
BATCH_CLUSTERS = 4096


@dataclass(frozen=True)
class DisassociationResult:
    """The release plus the private bookkeeping tests and diagnostics look at.

    ``clusters`` holds the record indices of each cluster and ``chunks`` what VerPart and
    Refine decided; neither is ever published.
    """

    release: DisassociatedRelease
    clusters: list[np.ndarray]
    chunks: list[ClusterChunks]
    units: list[Unit]


def check_parameters(n_records: int, k: int, m: int, max_cluster_size: int | None = None
                     ) -> None:
    """Refuse parameters the algorithm cannot honour, with the uniform parameter message."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 2:
        raise ParameterError("k", "must be an integer ≥ 2", k)
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1:
        raise ParameterError("m", "must be an integer ≥ 1", m)
    if k > n_records:
        raise ParameterError("k", f"must not exceed the number of records ({n_records:,})", k)
    if max_cluster_size is not None and max_cluster_size < k:
        raise ParameterError("max_cluster_size", f"must be ≥ k ({k})", max_cluster_size)


def verpart_batch(batch: Batch, k: int, m: int,
                  constraint_of: np.ndarray) -> list[VerPartResult]:
    """VerPart over a batch of clusters (module level so process pools can pickle it)."""
    lookup = constraint_of.tolist()
    return [verpart(rows, k, m, lookup) for rows in batch]


def _serial_map(fn: Callable[[Batch], list[VerPartResult]],
                batches: list[Batch]) -> list[list[VerPartResult]]:
    return [fn(b) for b in batches]


def _slot_tables(chunks: list[ClusterChunks], units: list[Unit], clusters: list[np.ndarray]
                 ) -> tuple[list[tuple[int, int, int]], np.ndarray, np.ndarray, np.ndarray]:
    """Every chunk (record chunks cluster by cluster, then shared chunks) as
    ``(kind, owner, size)`` and lookup keys mapping (owner, code) → chunk number.

    Record chunks are owned by a cluster, shared chunks by a joint cluster (unit index).
    """
    described: list[tuple[int, int, int]] = []
    rec_keys: list[tuple[int, int, int]] = []
    for p, c in enumerate(chunks):
        for d in c.domains:
            rec_keys.extend((p, t, len(described)) for t in d)
            described.append((0, p, len(clusters[p])))
    sh_keys: list[tuple[int, int, int]] = []
    for u, unit in enumerate(units):
        for d in unit.shared:
            sh_keys.extend((u, t, len(described)) for t in d)
            described.append((1, u, unit.size))
    rec = np.array(rec_keys, dtype=np.int64).reshape(-1, 3)
    sh = np.array(sh_keys, dtype=np.int64).reshape(-1, 3)
    return described, rec, sh, np.array([d[2] for d in described], dtype=np.int64)


def _publish(k: int, m: int, enc: EncodedRecords, clusters: list[np.ndarray],
             chunks: list[ClusterChunks], units: list[Unit]) -> DisassociatedRelease:
    """Assemble the release with array operations over all (record, code) pairs.

    Each pair goes to the slot of its record in the chunk holding its code (item-chunk codes
    go nowhere); every chunk's subrecords are then put in the documented order
    (:mod:`.order`), which depends on the published content only.
    """
    n, c = enc.n_records, max(enc.n_codes, 1)
    described, rec_keys, sh_keys, sizes = _slot_tables(chunks, units, clusters)
    lengths = np.array([len(idx) for idx in clusters], dtype=np.int64)
    members = np.concatenate(clusters) if clusters else np.zeros(0, dtype=np.int64)
    cluster_of = np.empty(n, dtype=np.int64)
    cluster_of[members] = np.repeat(np.arange(len(clusters)), lengths)
    position = np.empty(n, dtype=np.int64)          # place of the record inside its cluster
    position[members] = np.arange(len(members)) - np.repeat(np.cumsum(lengths) - lengths,
                                                            lengths)
    unit_of_cluster = np.full(len(clusters), -1, dtype=np.int64)
    joint_offset = np.zeros(len(clusters), dtype=np.int64)   # place of the cluster in its unit
    for u, unit in enumerate(units):
        if unit.shared:
            unit_of_cluster[unit.members] = u
            joint_offset[unit.members] = np.cumsum([0] + [len(clusters[p]) for p in
                                                          unit.members[:-1]])
    pair_rec = np.repeat(np.arange(n, dtype=np.int64), np.diff(enc.indptr))
    pair_code = enc.indices
    base = np.cumsum(sizes) - sizes
    slot = np.full(len(pair_rec), -1, dtype=np.int64)
    for keys, owner, offset in (
            (rec_keys, cluster_of[pair_rec], position[pair_rec]),
            (sh_keys, unit_of_cluster[cluster_of[pair_rec]],
             joint_offset[cluster_of[pair_rec]] + position[pair_rec])):
        if not len(keys):
            continue
        table = keys[:, 0] * c + keys[:, 1]
        order = np.argsort(table)
        query = owner * c + pair_code
        at = np.minimum(np.searchsorted(table[order], query), len(table) - 1)
        hit = (table[order][at] == query) & (owner >= 0)
        chunk = keys[order][at, 2]
        slot[hit] = base[chunk[hit]] + offset[hit]
    n_slots = int(sizes.sum())
    placed = slot >= 0
    target = slot[placed]       # slot order for now; each chunk is ordered below
    order = np.lexsort((pair_code[placed], target))
    names = np.array(enc.codes, dtype=object)
    flat = names[pair_code[placed][order]].tolist()
    bounds = np.zeros(n_slots + 1, dtype=np.int64)
    np.cumsum(np.bincount(target, minlength=n_slots), out=bounds[1:])
    cut = bounds.tolist()
    subrecords = [tuple(flat[a:b]) for a, b in zip(cut[:-1], cut[1:], strict=True)]
    published = [subrecords[b:b + s] for b, s in zip(base.tolist(), sizes.tolist(), strict=True)]
    ids = [f"P{i + 1}" for i in range(len(chunks))]
    record_chunks: list[list[Chunk]] = [[] for _ in chunks]
    shared_chunks: dict[int, list[Chunk]] = {}
    for (kind, owner_id, _), chunk_rows in zip(described, published, strict=True):
        (record_chunks[owner_id] if kind == 0 else
         shared_chunks.setdefault(owner_id, [])).append(chunk_rows)
    # The documented order (see .order): a function of each chunk's published content and
    # labels, so the slot order above (records in cluster order) never shows.
    record_chunks = [[ordered_chunk(ids[p], j, rows) for j, rows in enumerate(mine, start=1)]
                     for p, mine in enumerate(record_chunks)]
    shared_chunks = {u: [ordered_chunk(f"J{n}", j, rows) for j, rows in enumerate(mine, 1)]
                     for n, (u, mine) in enumerate(sorted(shared_chunks.items()), start=1)}
    out = [PublishedCluster(ids[p], len(clusters[p]), record_chunks[p],
                            tuple(enc.codes[t] for t in sorted(ch.item_support)))
           for p, ch in enumerate(chunks)]
    joints = [PublishedJointCluster(tuple(ids[p] for p in units[u].members), shared)
              for u, shared in sorted(shared_chunks.items())]
    return DisassociatedRelease(k, m, out, joints)


def disassociate(enc: EncodedRecords, k: int, m: int, constraint_of: np.ndarray,
                 rng: np.random.Generator, *, max_cluster_size: int | None = None,
                 max_joint_size: int | None = None,
                 map_batches: MapBatches | None = None) -> DisassociationResult:
    """Disassociate ``enc`` into a k^m-anonymous release.

    Parameters
    ----------
    enc
        The records (see :mod:`.encoding`).
    k, m
        Every itemset of ≤ m codes in a chunk is held by ≥ k subrecords; clusters have ≥ k
        records.
    constraint_of
        Code id → utility-constraint number (``-1``: in no constraint).
    rng
        Unused: the subrecord order is the documented rule of :mod:`.order` (kept so
        callers need not change).
    max_cluster_size
        HorPart stops splitting below this size; default 2k (the paper's choice).
    max_joint_size
        Largest joint cluster Refine builds, in records; default 4 × ``max_cluster_size``.
    map_batches
        How to run VerPart over batches of clusters (default: in this process, in order).

    Raises
    ------
    ParameterError
        If k < 2, m < 1, k exceeds the number of records or max_cluster_size < k.
    """
    check_parameters(enc.n_records, k, m, max_cluster_size)
    max_cluster_size = max_cluster_size or 2 * k
    max_joint_size = max_joint_size or 4 * max_cluster_size
    constraint_of = np.asarray(constraint_of, dtype=np.int64)
    clusters = horpart(enc, k, constraint_of, max_cluster_size)
    rows = enc.rows
    cluster_rows = [[rows[i] for i in idx.tolist()] for idx in clusters]
    single, frequent, items = single_chunk_clusters(enc.indptr, enc.indices, clusters, k, m)
    rest = np.flatnonzero(~single).tolist()
    batches = [[cluster_rows[p] for p in rest[i:i + BATCH_CLUSTERS]]
               for i in range(0, len(rest), BATCH_CLUSTERS)]
    work = partial(verpart_batch, k=k, m=m, constraint_of=constraint_of)
    results = [r for out in (map_batches or _serial_map)(work, batches) for r in out]
    decided: dict[int, VerPartResult] = dict(zip(rest, results, strict=True))
    chunks = [ClusterChunks(r, *decided[p]) if p in decided else
              ClusterChunks(r, [frequent[p]] if frequent[p] else [], items[p])
              for p, r in enumerate(cluster_rows)]
    units = refine(chunks, k, m, constraint_of, max_joint_size)
    release = _publish(k, m, enc, clusters, chunks, units)
    return DisassociationResult(release, clusters, chunks, units)
