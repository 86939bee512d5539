"""The original extract as the attack needs it: each patient's distinct codes (CSR) and the
tables the positional test compares a reading with (pair supports, record × code keys, each
code's records)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ehr_release.model.dataset import CODE, PATIENT_ID, Dataset
from ehr_release.privacy.attacks.disassociation.arrays import counted, distinct, pairs_in_rows


def original_records(dataset: Dataset) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Each patient's distinct codes as CSR (code ids local to the original, sorted)."""
    diag = dataset.diagnoses
    rec = _record_of_rows(dataset.patients.index, diag[PATIENT_ID].to_numpy())
    code, names = _sorted_codes(diag[CODE])
    keep = rec >= 0
    c = max(len(names), 1)
    key = rec[keep].astype(np.int64) * c + code[keep]
    if len(key) > 1 and not (key[1:] > key[:-1]).all():   # else distinct and sorted already
        key = distinct(key)
    indptr = np.zeros(dataset.n_patients + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // c, minlength=dataset.n_patients), out=indptr[1:])
    return names, indptr, key % c


def _record_of_rows(patients: pd.Index, ids: np.ndarray) -> np.ndarray:
    """``patients.get_indexer(ids)``, one lookup per run of equal ids: an extract lists a
    patient's diagnoses together, so a million patients' four million rows cost a million
    hash probes and one comparison of neighbours."""
    if len(ids) < 2:
        return patients.get_indexer(ids)
    new = np.empty(len(ids), dtype=bool)
    new[0] = True
    try:
        np.not_equal(ids[1:], ids[:-1], out=new[1:])
    except (TypeError, ValueError):   # ids without a truth value for != (pd.NA)
        return patients.get_indexer(ids)
    heads = np.flatnonzero(new)
    return np.repeat(patients.get_indexer(ids[heads]), np.diff(np.r_[heads, len(ids)]))


def _sorted_codes(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    """``pd.factorize(column.astype(str), sort=True)``: when every code is text already,
    factorized as it is and only the few distinct names sorted (no copy of millions of
    codes as text)."""
    code, names = pd.factorize(column)
    if (code < 0).any() or not all(isinstance(x, str) for x in names):
        code, names = pd.factorize(column.astype(str), sort=True)
        return code, [str(x) for x in names]
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    return rank[code], [names[i] for i in order]


@dataclass(frozen=True)
class Original:
    """The original records over the release's code numbering, and what the test needs:
    pair supports (sorted keys a·C + b), record × code keys (sorted r·C + t), each code's
    records (CSR by code) and support."""

    indptr: np.ndarray
    codes: np.ndarray
    pair_keys: np.ndarray
    pair_counts: np.ndarray
    record_keys: np.ndarray
    by_code_indptr: np.ndarray
    by_code: np.ndarray
    support: np.ndarray


def original_tables(indptr: np.ndarray, codes: np.ndarray, c: int) -> Original:
    a, b = pairs_in_rows(indptr)
    pk, pn = counted(codes[a] * c + codes[b], c * c)
    rec = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    support = np.bincount(codes, minlength=c)
    # a stable sort of small ints is a radix sort in NumPy: 16 bits when the codes fit
    small = codes.astype(np.int16) if c <= np.iinfo(np.int16).max else codes
    order = np.argsort(small, kind="stable")
    return Original(indptr, codes, pk, pn, rec * c + codes,
                     np.r_[0, np.cumsum(support)].astype(np.int64), rec[order], support)

