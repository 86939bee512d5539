"""The ε ledger: one accountant that owns the budget and records every mechanism call.

Every invocation of a mechanism is charged *before* it runs: which step, which mechanism,
what ε, on what data, and in which composition scope. Sequential charges add up; charges in
one parallel group touch disjoint records and cost their maximum. A charge that would take
the composed spend above the total raises :class:`BudgetExceeded` and the mechanism never
runs. Budgets are exact fractions (``Fraction``), never floats added up across modules.

The ledger is released as ``ledger.json``; ``privacy/diffgen.py`` recomputes the composition
from it and from the run's parameters without using this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ehr_release.algorithms.diffgen.noise import Exponential, Laplace
from ehr_release.core.errors import EhrReleaseError

SEQUENTIAL = "sequential"
PARALLEL = "parallel"


class BudgetExceeded(EhrReleaseError):
    """A charge would spend more privacy budget than the run was given."""


def fraction_text(value: Fraction) -> str:
    """``Fraction(1, 52)`` → ``"1/52"``; integers without a denominator."""
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/" \
        f"{value.denominator}"


@dataclass(frozen=True)
class Charge:
    """One mechanism invocation and the budget it spends."""

    index: int
    step: int
    phase: str
    mechanism: str
    epsilon: Fraction
    sensitivity: Fraction
    scale: float
    scope: str
    group: str | None
    touched: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "step": self.step, "phase": self.phase,
                "mechanism": self.mechanism, "epsilon": fraction_text(self.epsilon),
                "epsilon_float": float(self.epsilon),
                "sensitivity": fraction_text(self.sensitivity), "scale": self.scale,
                "scope": self.scope, "group": self.group, "touched": self.touched,
                "detail": self.detail}


class Ledger:
    """Accountant of one run: total budget, charges in order, composed spend."""

    def __init__(self, total: Fraction) -> None:
        if total <= 0:
            raise ValueError(f"a ledger needs a positive budget, got {total}")
        self.total = Fraction(total)
        self.charges: list[Charge] = []
        self.events: list[dict[str, Any]] = []

    def spent(self) -> Fraction:
        """Sequential charges summed plus, per parallel group, the largest charge."""
        groups: dict[str, Fraction] = {}
        total = Fraction(0)
        for c in self.charges:
            if c.scope == PARALLEL:
                key = c.group or f"#{c.index}"
                groups[key] = max(groups.get(key, Fraction(0)), c.epsilon)
            else:
                total += c.epsilon
        return total + sum(groups.values(), Fraction(0))

    def remaining(self) -> Fraction:
        return self.total - self.spent()

    def charge(self, mechanism: Laplace | Exponential, *, step: int, phase: str, scope: str,
               touched: str, group: str | None = None,
               detail: dict[str, Any] | None = None) -> Charge:
        """Record a charge of ``mechanism.epsilon``; refuse it if the budget would overflow.

        Raises
        ------
        BudgetExceeded
            The composed spend including this charge exceeds the total.
        ValueError
            A parallel charge without a group, or a mechanism whose own privacy loss at its
            sensitivity exceeds what it is charged.
        """
        if scope not in (SEQUENTIAL, PARALLEL) or (scope == PARALLEL and not group):
            raise ValueError(f"scope must be sequential or parallel-with-group, got {scope}")
        if mechanism.privacy_loss(mechanism.sensitivity) > mechanism.epsilon:
            raise ValueError(f"{mechanism} loses more than it is charged")
        kind = "laplace" if isinstance(mechanism, Laplace) else "exponential"
        entry = Charge(len(self.charges), step, phase, kind, mechanism.epsilon,
                       mechanism.sensitivity, mechanism.scale, scope, group, touched,
                       dict(detail or {}))
        self.charges.append(entry)
        if self.spent() > self.total:
            self.charges.pop()
            raise BudgetExceeded(f"charging ε={fraction_text(mechanism.epsilon)} for "
                                 f"{phase} at step {step} would exceed the budget "
                                 f"ε={fraction_text(self.total)}")
        return entry

    def note(self, *, step: int, event: str, **detail: Any) -> None:
        """Record something that spends nothing (a categorical step, an early stop)."""
        self.events.append({"step": step, "event": event, **detail})

    def to_dict(self) -> dict[str, Any]:
        return {"total_budget": fraction_text(self.total),
                "spent": fraction_text(self.spent()),
                "spent_float": float(self.spent()),
                "charges": [c.to_dict() for c in self.charges],
                "events": self.events}
