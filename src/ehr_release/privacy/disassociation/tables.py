"""The release and the original flattened into integer arrays over one code numbering.

Every later figure (counts, cap, evidence) is computed from these arrays, so the JSON is
walked once.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd

from ehr_release.dataset import CODE, PATIENT_ID, Dataset
from ehr_release.privacy.disassociation.arrays import distinct
from ehr_release.privacy.disassociation.parse import ParsedRelease, ReleaseRejected, expect


@dataclass(frozen=True)
class Tables:
    """The release and the original as integer arrays over one code numbering.

    Chunks are numbered globally: record chunks of all clusters, then shared chunks.
    ``dom_*`` rows list, per cluster, every code of its own domain with ``dom_value`` =
    ``cap_P({t})`` (its record-chunk support, or |P| for an item-chunk code) and the chunk
    holding it (-1 for the item chunk). ``sh_*`` rows list, per joint cluster, each shared
    code with its shared chunk and support there.
    """

    codes: list[str]
    cluster_size: np.ndarray
    sub_chunk: np.ndarray
    sub_indptr: np.ndarray
    sub_codes: np.ndarray
    chunk_label: list[str]
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


def _original_rows(dataset: Dataset) -> tuple[list[str], np.ndarray, np.ndarray]:
    diag = dataset.diagnoses
    rec = dataset.patients.index.get_indexer(diag[PATIENT_ID])
    code, names = pd.factorize(diag[CODE].astype(str), sort=True)
    n_codes = max(len(names), 1)
    key = distinct(rec[rec >= 0].astype(np.int64) * n_codes + code[rec >= 0])
    indptr = np.zeros(dataset.n_patients + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // n_codes, minlength=dataset.n_patients), out=indptr[1:])
    return [str(c) for c in names], indptr, key % n_codes


def _flatten(chunks: list[tuple[str, list[list[str]]]]) -> tuple[list[int], list[Any]]:
    """Subrecord lengths and all tokens, chunk after chunk (C-level iteration)."""
    lengths: list[int] = []
    tokens: list[Any] = []
    for label, chunk in chunks:
        expect(all(type(s) is list for s in chunk), f"{label} holds a subrecord that is not "
                "a list of code strings")
        lengths.extend(map(len, chunk))
        tokens.extend(chain.from_iterable(chunk))
    return lengths, tokens


def build_tables(rel: ParsedRelease, dataset: Dataset) -> Tables:
    """Flatten a release (whose shape passed :func:`shape_problems`) and the original.

    Raises
    ------
    ReleaseRejected
        If a subrecord is not a list of distinct code strings.
    """
    orig_names, orig_indptr, orig_local = _original_rows(dataset)
    labelled = [(f"cluster {c.id} record chunk {i + 1}", ch)
                for c in rel.clusters for i, ch in enumerate(c.chunks)]
    first_shared = len(labelled)
    labelled += [(f"joint cluster {n + 1} shared chunk {i + 1}", ch)
                 for n, j in enumerate(rel.joints) for i, ch in enumerate(j.chunks)]
    chunk_label = [label for label, _ in labelled]
    lengths, tokens = _flatten(labelled)
    item_tokens = [t for c in rel.clusters for t in c.items]
    try:
        released = set(tokens)
    except TypeError:
        raise ReleaseRejected("a subrecord holds something that is not a code string") from None
    expect(all(type(x) is str for x in released), "a subrecord holds a code that is not a string")
    codes = sorted(set(orig_names) | released | set(item_tokens))
    n_codes = len(codes)
    index = {code: i for i, code in enumerate(codes)}
    orig_codes = np.array([index[x] for x in orig_names], dtype=np.int64)[orig_local] \
        if len(orig_local) else np.zeros(0, dtype=np.int64)

    n_sub = len(lengths)
    sub_indptr = np.zeros(n_sub + 1, dtype=np.int64)
    np.cumsum(lengths, out=sub_indptr[1:])
    ids = np.fromiter(map(index.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    sub_row = np.repeat(np.arange(n_sub, dtype=np.int64), lengths)
    row_key = np.sort(sub_row * n_codes + ids)         # codes sorted inside each subrecord
    repeated = np.flatnonzero(row_key[1:] == row_key[:-1])
    sub_chunk = np.repeat(np.arange(len(labelled), dtype=np.int64),
                          [len(ch) for _, ch in labelled])
    if len(repeated):
        bad = int(sub_chunk[row_key[repeated[0]] // n_codes])
        raise ReleaseRejected(f"{chunk_label[bad]} holds a subrecord repeating a code")
    sub_codes = row_key % n_codes

    # support of each code in each chunk
    owner = sub_chunk[sub_row]
    key, support = np.unique(owner * n_codes + sub_codes, return_counts=True)
    k_chunk, k_code = key // n_codes, key % n_codes
    per_cluster = [len(c.chunks) for c in rel.clusters]
    chunk_cluster = np.concatenate([np.repeat(np.arange(len(rel.clusters)), per_cluster),
                                    np.full(len(labelled) - first_shared, -1)]).astype(np.int64)
    per_joint = [len(j.chunks) for j in rel.joints]
    chunk_joint = np.concatenate([np.full(first_shared, -1),
                                  np.repeat(np.arange(len(rel.joints)), per_joint)]
                                 ).astype(np.int64)

    sizes = np.array([c.size for c in rel.clusters], dtype=np.int64)
    item_cluster = np.repeat(np.arange(len(rel.clusters), dtype=np.int64),
                             [len(c.items) for c in rel.clusters])
    item_code = np.fromiter(map(index.__getitem__, item_tokens), dtype=np.int64,
                            count=len(item_tokens))
    is_rec = k_chunk < first_shared
    dom_cluster = np.concatenate([chunk_cluster[k_chunk[is_rec]], item_cluster])
    dom_code = np.concatenate([k_code[is_rec], item_code])
    dom_chunk = np.concatenate([k_chunk[is_rec], np.full(len(item_code), -1, dtype=np.int64)])
    dom_value = np.concatenate([support[is_rec], sizes[item_cluster]])
    order = np.lexsort((dom_code, dom_cluster))
    position = {c.id: i for i, c in enumerate(rel.clusters)}
    joint_of_cluster = np.full(len(rel.clusters), -1, dtype=np.int64)
    for n, j in enumerate(rel.joints):
        joint_of_cluster[[position[x] for x in j.members]] = n
    sh = ~is_rec
    return Tables(codes, sizes, sub_chunk, sub_indptr, sub_codes, chunk_label,
                  dom_cluster[order], dom_code[order], dom_chunk[order], dom_value[order],
                  joint_of_cluster, chunk_joint[k_chunk[sh]], k_code[sh], k_chunk[sh],
                  support[sh], orig_indptr, orig_codes)

