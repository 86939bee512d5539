"""The project's own exception types.

Every failure a user can cause (bad file, bad parameter, illegal action) surfaces as one of
these, carrying enough context to name the problem in a single line. The CLI turns them into
a message on stderr and a non-zero exit; anything else is a bug.
"""

from __future__ import annotations


class EhrReleaseError(Exception):
    """Base class of every error this project raises on purpose."""


class InputError(EhrReleaseError):
    """An input file cannot be used; names the file, and where known the row and column.

    ``row`` is the 1-based data row (header excluded) as a spreadsheet user would count it.
    """

    def __init__(
        self,
        problem: str,
        *,
        file: str | None = None,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        self.problem = problem
        self.file = file
        self.row = row
        self.column = column
        where = []
        if file is not None:
            where.append(f"file {file}")
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {problem}" if prefix else problem)


class ParameterError(EhrReleaseError):
    """A parameter breaks a rule: says which parameter, which rule, and what was given."""

    def __init__(self, parameter: str, rule: str, value: object) -> None:
        self.parameter = parameter
        self.rule = rule
        self.value = value
        super().__init__(f"parameter {parameter!r} {rule}; got {value!r}")


class ConfigError(EhrReleaseError):
    """A configuration file (policy, hierarchy, constraints) is inconsistent or malformed."""


class IllegalTransition(EhrReleaseError):
    """A release run was asked to move to a status its state machine forbids."""


class ApprovalError(EhrReleaseError):
    """An approval decision is not allowed (self-approval, already decided, not pending)."""


class NotFound(EhrReleaseError):
    """A run, dataset or artifact id does not exist."""
