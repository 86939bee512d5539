"""Shapes of what the verify and evaluate stages produce.

Kept apart from ``algorithms/`` and ``privacy/`` so both the verifier and the certificate can
use them without the verifier importing anything from the algorithm it checks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Requirement:
    """One privacy requirement: what was required, what was measured, and whether it held.

    ``required`` and ``measured`` are human-readable (they go into the certificate verbatim),
    e.g. ``required="every ≤2-itemset support ≥ 5"``, ``measured="smallest support 5"``.
    """

    name: str
    required: str
    measured: str
    passed: bool
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VerificationReport:
    """The verifier's verdict: it holds only if every requirement passed."""

    algorithm: str
    requirements: list[Requirement]

    @property
    def holds(self) -> bool:
        return bool(self.requirements) and all(r.passed for r in self.requirements)

    @property
    def failures(self) -> list[Requirement]:
        return [r for r in self.requirements if not r.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "holds": self.holds,
            "requirements": [asdict(r) for r in self.requirements],
        }


@dataclass(frozen=True)
class Chart:
    """A rendered chart for the certificate (PNG bytes) with a caption."""

    name: str
    caption: str
    png: bytes


@dataclass(frozen=True)
class UtilityReport:
    """Utility figures of a release: named metrics, optional tables and charts."""

    algorithm: str
    metrics: dict[str, float]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    charts: list[Chart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "metrics": self.metrics,
            "tables": self.tables,
            "charts": [{"name": c.name, "caption": c.caption} for c in self.charts],
            "notes": self.notes,
        }
