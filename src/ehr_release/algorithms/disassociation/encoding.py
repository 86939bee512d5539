"""Records as integer code ids in CSR form: the shape every step of Disassociation works on.

Codes are numbered in lexicographic order, so "smallest id" means "lexicographically first"
— the tie-break the spec's worked example needs — and comparisons are integer comparisons.
The CSR arrays feed the vectorized horizontal partitioning; per-cluster work reads records
as small tuples of ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ehr_release.core.errors import InputError
from ehr_release.model.dataset import CODE, PATIENT_ID, Dataset


@dataclass(frozen=True, eq=False)
class EncodedRecords:
    """One record per patient: the sorted distinct code ids in ``indices[indptr[i]:indptr[i+1]]``.

    Parameters
    ----------
    codes
        Code names, sorted; a code's id is its position.
    indptr
        ``int64`` array of length ``n_records + 1``.
    indices
        ``int64`` code ids, sorted and distinct within each record.
    """

    codes: tuple[str, ...]
    indptr: np.ndarray
    indices: np.ndarray

    @property
    def n_records(self) -> int:
        return len(self.indptr) - 1

    @property
    def n_codes(self) -> int:
        return len(self.codes)

    @cached_property
    def rows(self) -> list[tuple[int, ...]]:
        """Each record as a tuple of code ids (for the per-cluster steps)."""
        flat = self.indices.tolist()
        bounds = self.indptr.tolist()
        return [tuple(flat[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def code_ids(self, codes: Iterable[str]) -> list[int]:
        """Ids of those ``codes`` that occur in the records (others are skipped)."""
        index = self.code_index
        return [index[c] for c in codes if c in index]

    @cached_property
    def code_index(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.codes)}

    def constraint_ids(self, constraint_of: Mapping[str, int]) -> np.ndarray:
        """Code id → constraint number (``-1`` for codes in no constraint)."""
        out = np.full(self.n_codes, -1, dtype=np.int64)
        for code, i in constraint_of.items():
            j = self.code_index.get(code)
            if j is not None:
                out[j] = i
        return out


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values; sorts instead of ``np.unique``'s hash path (far slower)."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _from_pairs(n_records: int, rec: np.ndarray, code: np.ndarray,
                names: Sequence[str]) -> EncodedRecords:
    n_codes = max(len(names), 1)
    key = distinct(rec.astype(np.int64) * n_codes + code.astype(np.int64))
    rec, code = key // n_codes, key % n_codes
    indptr = np.zeros(n_records + 1, dtype=np.int64)
    np.cumsum(np.bincount(rec, minlength=n_records), out=indptr[1:])
    return EncodedRecords(tuple(names), indptr, code.astype(np.int64))


def encode_code_sets(records: Sequence[Iterable[str]]) -> EncodedRecords:
    """Encode Python code collections (tests, fixtures, small inputs)."""
    lists = [list(r) for r in records]
    names = sorted({c for r in lists for c in r})
    index = {c: i for i, c in enumerate(names)}
    rec = np.repeat(np.arange(len(lists), dtype=np.int64), [len(r) for r in lists])
    code = np.fromiter((index[c] for r in lists for c in r), dtype=np.int64, count=len(rec))
    return _from_pairs(len(lists), rec, code, names)


def encode_dataset(dataset: Dataset) -> EncodedRecords:
    """Encode a dataset's code sets (repeats collapsed) without a Python loop over rows."""
    diag = dataset.diagnoses
    rec = dataset.patients.index.get_indexer(diag[PATIENT_ID])
    if (rec < 0).any():
        raise InputError("diagnoses name patients that are not in the patients table",
                         file=dataset.source or None)
    code, names = pd.factorize(diag[CODE].astype(str), sort=True)
    return _from_pairs(dataset.n_patients, rec, code, [str(c) for c in names])
