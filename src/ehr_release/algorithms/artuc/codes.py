"""Diagnosis codes as integer arrays (CSR), so a cluster's codes are gathered in one slice.

Code ids follow the codes' lexicographic order, so "lexicographic" tie-breaks in GenDiag are
comparisons of ids. Each code also carries the id of the utility-constraint code set it
belongs to: GenDiag may only generalize codes of the same set together; and, when the data
owner weighted the code sets, its weight w (Def. 5 of the ArtUC paper: UL(ũ) = (2^|ũ| − 1)·w(ũ)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CodeTable:
    """Every record's distinct codes as sorted code ids, plus each code's code-set id."""

    names: list[str]
    indptr: np.ndarray
    indices: np.ndarray
    code_set: np.ndarray
    #: Each code's weight, or None when every weight is 1 (then UL is computed exactly as
    #: before weights existed, so unweighted releases keep their bytes).
    weight: np.ndarray | None = None

    @classmethod
    def build(cls, records: Sequence[frozenset[str]],
              code_set_of: Mapping[str, int] | None = None,
              weight_of: Mapping[str, float] | None = None) -> CodeTable:
        """``code_set_of=None`` puts every code in one set (no utility constraints: RmR);
        ``weight_of`` gives the codes whose weight is not 1 (empty or None: all 1)."""
        names = sorted({c for r in records for c in r})
        ids = {c: i for i, c in enumerate(names)}
        lens = np.fromiter((len(r) for r in records), dtype=np.int64, count=len(records))
        indptr = np.zeros(len(records) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        flat = np.fromiter((ids[c] for r in records for c in sorted(r)), dtype=np.int64,
                           count=int(indptr[-1]))
        sets = (np.zeros(len(names), dtype=np.int64) if code_set_of is None
                else np.array([code_set_of[c] for c in names], dtype=np.int64))
        weight = (np.array([weight_of.get(c, 1.0) for c in names], dtype=float)
                  if weight_of else None)
        return cls(names, indptr, flat, sets, weight)

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(local record position, code id) of every code occurrence of ``rows``."""
        starts = self.indptr[rows]
        lens = self.indptr[rows + 1] - starts
        total = int(lens.sum())
        offsets = np.repeat(np.cumsum(lens) - lens, lens)
        flat = np.arange(total, dtype=np.int64) - offsets + np.repeat(starts, lens)
        return np.repeat(np.arange(len(rows), dtype=np.int64), lens), self.indices[flat]
