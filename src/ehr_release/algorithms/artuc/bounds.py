"""A floor under GenDiag's UL of C ∪ C′ that costs no GenDiag: what merging may skip.

Step 20 runs GenDiag on C ∪ C′ for every feasible partner C′ of the popped cluster C and
keeps the least UL (ties: the smaller partner id). Almost all of ArtUC's time is those
calls, and all but one of their results are thrown away. A partner whose UL cannot beat
the best found so far need not be run — if a cheap bound says so exactly.

The bound: in C ∪ C′, a code set whose codes occur, all together, in fewer than k records
can never give an item of support ≥ k (GenDiag only generalizes codes of one set together,
and an item's support is at most its set's). A k^m-anonymous result (m ≥ 1) keeps no item
below k, so every code of such a set is suppressed, and each occurrence adds 1 to s(r)
(Def. 6). The suppression UL is a sum of those whole counts and the generalization UL is
≥ 0, so UL(C ∪ C′) ≥ Σ occurrences of those sets' codes, exactly, also in floating point.
Both counts per set add over C and C′ (their records are disjoint), so each cluster's are
computed once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ehr_release.algorithms.artuc.codes import CodeTable


@dataclass(frozen=True)
class SetCounts:
    """Per code set: records holding one of its codes, and occurrences of its codes."""

    records: np.ndarray
    occurrences: np.ndarray

    def __add__(self, other: SetCounts) -> SetCounts:
        return SetCounts(self.records + other.records, self.occurrences + other.occurrences)


@dataclass(frozen=True)
class SuppressionFloor:
    """The floor described in the module docstring, for one code table and k."""

    table: CodeTable
    k: int

    def counts(self, rows: np.ndarray) -> SetCounts:
        sets = int(self.table.code_set.max()) + 1 if len(self.table.code_set) else 1
        rec, code = self.table.gather(rows)
        owner = self.table.code_set[code]
        holding = np.unique(rec * sets + owner) % sets
        return SetCounts(np.bincount(holding, minlength=sets).astype(np.int64),
                         np.bincount(owner, minlength=sets).astype(np.int64))

    def floors(self, mine: SetCounts, partners: list[SetCounts]) -> list[float]:
        """UL(C ∪ C′) ≥ the returned value, for each partner C′ of C."""
        if not partners:
            return []
        records = mine.records + np.stack([p.records for p in partners])
        occurrences = mine.occurrences + np.stack([p.occurrences for p in partners])
        doomed = np.where(records < self.k, occurrences, 0).sum(axis=1)
        return [float(x) for x in doomed.tolist()]
