"""The original extract as the attack needs it: each patient's distinct codes (CSR) and the
tables the positional test compares a reading with (pair supports, record × code keys, each
code's records)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ehr_release.dataset import CODE, PATIENT_ID, Dataset
from ehr_release.privacy.attacks.disassociation.arrays import counted, distinct, pairs_in_rows


def original_records(dataset: Dataset) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Each patient's distinct codes as CSR (code ids local to the original, sorted)."""
    diag = dataset.diagnoses
    rec = dataset.patients.index.get_indexer(diag[PATIENT_ID])
    code, names = pd.factorize(diag[CODE].astype(str), sort=True)
    keep = rec >= 0
    c = max(len(names), 1)
    key = distinct(rec[keep].astype(np.int64) * c + code[keep])
    indptr = np.zeros(dataset.n_patients + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // c, minlength=dataset.n_patients), out=indptr[1:])
    return [str(x) for x in names], indptr, key % c



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
    order = np.argsort(codes, kind="stable")
    return Original(indptr, codes, pk, pn, rec * c + codes,
                     np.r_[0, np.cumsum(support)].astype(np.int64), rec[order], support)

