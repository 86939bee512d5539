"""The release and the original flattened into integer arrays over one code numbering.

Every later figure (counts, cap, evidence) is computed from these arrays; the release's own
arrays come from :mod:`.parse` unchanged but for one code renumbering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ehr_release.model.dataset import CODE, PATIENT_ID, Dataset
from ehr_release.privacy.disassociation.arrays import counted, distinct
from ehr_release.privacy.disassociation.parse import ParsedRelease, chunk_label


@dataclass(frozen=True)
class Tables:
    """The release and the original as integer arrays over one code numbering.

    Chunks are numbered globally: record chunks of all clusters, then shared chunks.
    ``dom_*`` rows list, per cluster, every code of its own domain with ``dom_value`` =
    ``cap_P({t})`` (its record-chunk support, or |P| for an item-chunk code) and the chunk
    holding it (-1 for the item chunk). ``sh_*`` rows list, per joint cluster, each shared
    code with its shared chunk and support there. ``chunk_code_key`` lists chunk·C + code,
    sorted, for every code of every chunk, and ``chunk_code_support`` its support there.
    """

    codes: list[str]
    cluster_size: np.ndarray
    sub_chunk: np.ndarray
    sub_indptr: np.ndarray
    sub_codes: np.ndarray
    chunk_label: Sequence[str]
    dom_cluster: np.ndarray
    dom_code: np.ndarray
    dom_chunk: np.ndarray
    dom_value: np.ndarray
    joint_of_cluster: np.ndarray
    sh_joint: np.ndarray
    sh_code: np.ndarray
    sh_chunk: np.ndarray
    sh_value: np.ndarray
    orig_indptr: np.ndarray
    orig_codes: np.ndarray
    chunk_code_key: np.ndarray
    chunk_code_support: np.ndarray


def _factorized_codes(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    """``pd.factorize(column.astype(str), sort=True)``, without copying millions of codes
    as text when they are text already: factorized as they are, then only the few distinct
    names are sorted and the numbers mapped."""
    code, names = pd.factorize(column)
    if (code < 0).any() or not all(isinstance(name, str) for name in names):
        code, names = pd.factorize(column.astype(str), sort=True)
        return code, [str(c) for c in names]
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    return rank[code], [names[i] for i in order]


def _record_of_rows(patients: pd.Index, ids: np.ndarray) -> np.ndarray:
    """``patients.get_indexer(ids)``, looking up each run of equal ids once: an extract
    lists a patient's diagnoses together, so a million patients' four million rows are a
    million lookups (each a hash probe into a million strings) and one cheap comparison of
    neighbours."""
    if len(ids) < 2:
        return patients.get_indexer(ids)
    new = np.empty(len(ids), dtype=bool)
    new[0] = True
    try:
        np.not_equal(ids[1:], ids[:-1], out=new[1:])
    except (TypeError, ValueError):  # ids that do not compare to a truth value (pd.NA)
        return patients.get_indexer(ids)
    heads = np.flatnonzero(new)
    return np.repeat(patients.get_indexer(ids[heads]), np.diff(np.r_[heads, len(ids)]))


def _original_rows(dataset: Dataset) -> tuple[list[str], np.ndarray, np.ndarray]:
    diag = dataset.diagnoses
    rec = _record_of_rows(dataset.patients.index, diag[PATIENT_ID].to_numpy())
    code, names = _factorized_codes(diag[CODE])
    n_codes = max(len(names), 1)
    known = rec >= 0
    if not known.all():
        rec, code = rec[known], code[known]
    key = rec.astype(np.int64) * n_codes     # a new array: the sum is added in place
    key += code
    if len(key) > 1 and not (key[1:] > key[:-1]).all():  # else sorted by patient and code
        key = distinct(key)
        rec, code = key // n_codes, key % n_codes
    indptr = np.zeros(dataset.n_patients + 1, dtype=np.int64)
    np.cumsum(np.bincount(rec, minlength=dataset.n_patients), out=indptr[1:])
    return names, indptr, code.astype(np.int64, copy=False)


class ChunkLabels(Sequence[str]):
    """Chunk names for reports, made on demand (a million records have ~a million chunks)."""

    def __init__(self, rel: ParsedRelease) -> None:
        self._rel = rel

    def __len__(self) -> int:
        return len(self._rel.chunk_owner)

    def __getitem__(self, g: Any) -> Any:
        if isinstance(g, slice):
            return [chunk_label(self._rel, i) for i in range(len(self))[g]]
        return chunk_label(self._rel, int(g))


def _renumbered(ids: np.ndarray, names: list[str], index: dict[str, int]) -> np.ndarray:
    """``ids`` (into ``names``) as ids into the joint numbering ``index``; the same array
    when the numberings agree (the original's codes are usually all the codes there are)."""
    remap = np.array([index[x] for x in names], dtype=np.int64)
    if np.array_equal(remap, np.arange(len(remap))):
        return ids.astype(np.int64, copy=False)
    return remap[ids] if len(ids) else np.zeros(0, dtype=np.int64)


def build_tables(rel: ParsedRelease, dataset: Dataset) -> Tables:
    """Number the release (whose shape passed :func:`shape_problems`) and the original over
    one code numbering and derive each chunk's code supports."""
    orig_names, orig_indptr, orig_local = _original_rows(dataset)
    codes = sorted(set(orig_names).union(rel.code_names))
    n_codes = len(codes)
    index = {code: i for i, code in enumerate(codes)}
    orig_codes = _renumbered(orig_local, orig_names, index)
    sub_codes = _renumbered(rel.sub_codes, rel.code_names, index)  # rows stay ascending
    item_code = _renumbered(rel.item_code, rel.code_names, index)

    # support of each code in each chunk
    key = np.repeat(rel.sub_chunk * n_codes, np.diff(rel.sub_indptr))
    key += sub_codes
    key, support = counted(key)
    k_chunk, k_code = key // n_codes, key % n_codes
    shared = rel.chunk_shared
    chunk_cluster = np.where(shared, -1, rel.chunk_owner)
    chunk_joint = np.where(shared, rel.chunk_owner, -1)
    sizes = rel.cluster_size
    item_cluster = rel.item_cluster
    is_rec = ~shared[k_chunk]
    dom_cluster = np.concatenate([chunk_cluster[k_chunk[is_rec]], item_cluster])
    dom_code = np.concatenate([k_code[is_rec], item_code])
    dom_chunk = np.concatenate([k_chunk[is_rec], np.full(len(item_code), -1, dtype=np.int64)])
    dom_value = np.concatenate([support[is_rec], sizes[item_cluster]])
    order = np.argsort(dom_cluster * n_codes + dom_code, kind="stable")  # by cluster, code
    sh = ~is_rec
    return Tables(codes, sizes, rel.sub_chunk, rel.sub_indptr, sub_codes, ChunkLabels(rel),
                  dom_cluster[order], dom_code[order], dom_chunk[order], dom_value[order],
                  rel.joint_of_cluster, chunk_joint[k_chunk[sh]], k_code[sh], k_chunk[sh],
                  support[sh], orig_indptr, orig_codes, key, support)
