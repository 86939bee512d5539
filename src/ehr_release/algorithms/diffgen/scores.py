"""Score functions of a candidate specialization, and their sensitivities Δu.

A candidate ``v`` is scored on ``D_v`` (the live records whose generalized value is ``v``),
split by the child each record would move to, into a *table* ``[child, class]`` of counts:

* **Max** ``Σ_child max_class |D_child^class|`` -- Δu = 1: one record changes one cell by one.
* **InfoGain** ``H(D_v) − Σ_child |D_child|/|D_v| · H(D_child)`` with Shannon entropy in
  bits over the class -- Δu = log2 |classes| (the bound the DiffGen authors use).

Tables may carry leading axes (``[..., child, class]``) to score many candidates at once.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ehr_release.algorithms.diffgen.noise import class_count_sensitivity

SCORES = ("max", "infogain")


def max_score(tables: np.ndarray) -> np.ndarray:
    """Sum over children of the majority class count."""
    return np.asarray(tables).max(axis=-1).sum(axis=-1).astype(float)


def _entropy(counts: np.ndarray) -> np.ndarray:
    """Entropy in bits of class counts along the last axis (0 for empty rows)."""
    counts = np.asarray(counts, dtype=float)
    total = counts.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(total > 0, counts / total, 0.0)
        terms = np.where(p > 0, -p * np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=-1)


def infogain_score(tables: np.ndarray) -> np.ndarray:
    """Information gain of splitting ``D_v`` into its children, in bits (0 if empty)."""
    tables = np.asarray(tables, dtype=float)
    parent = tables.sum(axis=-2)
    n = parent.sum(axis=-1)
    child_n = tables.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(n[..., None] > 0, child_n / n[..., None], 0.0)
    return _entropy(parent) - (weights * _entropy(tables)).sum(axis=-1)


def score_tables(kind: str, tables: np.ndarray) -> np.ndarray:
    """Scores of ``tables`` under ``kind`` (``max`` or ``infogain``)."""
    if kind == "max":
        return max_score(tables)
    if kind == "infogain":
        return infogain_score(tables)
    raise ValueError(f"unknown score {kind!r}; expected one of {SCORES}")


def sensitivity(kind: str, n_classes: int) -> Fraction:
    """Δu of the score: 1 for Max, log2 |classes| (rounded up) for InfoGain."""
    if kind == "max":
        return Fraction(1)
    if kind == "infogain":
        return class_count_sensitivity(n_classes)
    raise ValueError(f"unknown score {kind!r}; expected one of {SCORES}")
