"""Choosing a split point of a numerical interval with the exponential mechanism.

The candidates are every point ``s`` of the public interval ``[lo, hi)`` (every integer
``lo < s < hi`` for integer domains); ``s`` sends values ``< s`` left. Points between two
consecutive distinct data values induce the same partition, hence the same score, so the
mechanism is run over these *sub-intervals* ``I_j`` with probability
``∝ |I_j|·exp(ε'·u_j / (2Δu))`` and then a point is drawn uniformly inside the chosen one --
exactly the exponential mechanism over all points, in time linear in the distinct values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ehr_release.algorithms.diffgen.noise import Exponential, NoiseSource
from ehr_release.algorithms.diffgen.scores import score_tables
from ehr_release.configuration.taxonomies import NumericalDomain


@dataclass(frozen=True)
class SplitCandidates:
    """Sub-intervals of equal score: ``s`` ranges over ``(start_j, end_j]`` (real domains)
    or the integers ``start_j + 1 .. end_j`` (integer domains)."""

    start: np.ndarray
    end: np.ndarray
    size: np.ndarray
    left: np.ndarray  # [j, class] counts of the records that go left
    total: np.ndarray  # [class] counts in the interval

    def tables(self) -> np.ndarray:
        """``[j, child, class]`` contingency tables (child 0 = left, 1 = right)."""
        return np.stack([self.left, self.total[None, :] - self.left], axis=1)


def split_candidates(values: np.ndarray, classes: np.ndarray, n_classes: int, lo: float,
                     hi: float, domain: NumericalDomain) -> SplitCandidates:
    """Group the split points of ``[lo, hi)`` by the partition of ``values`` they induce."""
    uniq, inverse = np.unique(values, return_inverse=True)
    counts = np.bincount(inverse * n_classes + classes,
                         minlength=len(uniq) * n_classes).reshape(len(uniq), n_classes)
    cum = np.cumsum(counts, axis=0)
    total = cum[-1] if len(uniq) else np.zeros(n_classes, dtype=np.int64)
    # s in (b_j, b_{j+1}] sends exactly the values ≤ b_j left; b_0 = lo sends none.
    upper = hi - 1 if domain.integer else hi
    bounds = np.concatenate([[lo], uniq, [upper]]).astype(float)
    start, end = bounds[:-1], bounds[1:]
    left = np.vstack([np.zeros((1, n_classes), dtype=np.int64), cum])
    size = end - start
    keep = size > 0
    return SplitCandidates(start[keep], end[keep], size[keep], left[keep], total)


def choose_split(cands: SplitCandidates, score: str, mechanism: Exponential,
                 noise: NoiseSource, domain: NumericalDomain) -> tuple[float, float]:
    """Draw a split point; returns ``(point, score of the chosen partition)``."""
    scores = score_tables(score, cands.tables())
    weighted = scores + mechanism.scale * np.log(cands.size)
    j = noise.exponential(weighted, mechanism.scale)
    if domain.integer:
        point = float(cands.start[j] + 1 + noise.uniform_index(int(cands.size[j])))
    else:
        frac = (noise.uniform_index(2**53 - 1) + 1) / 2**53  # in (0, 1)
        point = float(cands.start[j] + frac * cands.size[j])
    return point, float(scores[j])
