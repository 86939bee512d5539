"""The project's own exception types.

Every failure a user can cause (bad file, bad parameter, illegal action) surfaces as one of
these, carrying enough context to name the problem in a single line. The CLI turns them into
a message on stderr and a non-zero exit; anything else is a bug.
"""

from __future__ import annotations

#: The longest error text stored anywhere (audit event, run record, log line): a hostile file
#: must not turn one refusal into megabytes of database.
MAX_STORED_MESSAGE = 500
#: The longest quoted detail (a cell, a header) even on the terminal.
MAX_DETAIL = 200


class EhrReleaseError(Exception):
    """Base class of every error this project raises on purpose."""

    def public(self) -> str:
        """The message as it may be stored (audit trail, run record): no patient value.

        Subclasses whose message can quote input data override this.
        """
        return str(self)


class InputError(EhrReleaseError):
    """An input file cannot be used; names the file, and where known the row and column.

    ``row`` is the 1-based data row (header excluded) as a spreadsheet user would count it.
    ``problem`` states the rule that was broken and must never quote the data; ``detail`` may
    (the offending value, the header found): the steward sees it on the terminal, but it is
    left out of everything stored (:meth:`public`), since the audit trail is permanent and
    shown on the dashboard.
    """

    def __init__(
        self,
        problem: str,
        *,
        file: str | None = None,
        row: int | None = None,
        column: str | None = None,
        detail: str | None = None,
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
        self.where = prefix
        self.detail = None if detail is None else cap(detail, MAX_DETAIL)
        text = f"{prefix}: {problem}" if prefix else problem
        super().__init__(f"{text} ({self.detail})" if self.detail else text)

    def public(self) -> str:
        """File, row, column and rule — never ``detail``, which may quote a cell value."""
        return f"{self.where}: {self.problem}" if self.where else self.problem


class ParameterError(EhrReleaseError):
    """A parameter breaks a rule: says which parameter, which rule, and what was given."""

    def __init__(self, parameter: str, rule: str, value: object,
                 message: str | None = None) -> None:
        self.parameter = parameter
        self.rule = rule
        self.value = value
        super().__init__(message or f"parameter {parameter!r} {rule}; got {value!r}")


class ConfigError(EhrReleaseError):
    """A configuration file (policy, hierarchy, constraints) is inconsistent or malformed.

    ``detail`` (terminal only, like :class:`InputError`'s) may quote the data the
    configuration failed on; the stored message never does.
    """

    def __init__(self, message: str, *, detail: str | None = None) -> None:
        self.message = message
        self.detail = None if detail is None else cap(detail, MAX_DETAIL)
        super().__init__(f"{message} ({self.detail})" if self.detail else message)

    def public(self) -> str:
        return self.message


class IllegalTransition(EhrReleaseError):
    """A release run was asked to move to a status its state machine forbids."""


class ApprovalError(EhrReleaseError):
    """An approval decision is not allowed (self-approval, already decided, not pending)."""


class NotFound(EhrReleaseError):
    """A run, dataset or artifact id does not exist."""


def stored_message(exc: BaseException) -> str:
    """An error as it may be stored or shown on the dashboard: no value, bounded length.

    The project's own errors give their :meth:`~EhrReleaseError.public` text; an operating-
    system error its reason (``No space left on device``: no data, and what an operator must
    act on); anything else is a bug whose message could quote anything (``KeyError('MRN-…')``),
    so nothing of it is kept — the traceback stays in the run's local flow log.
    :func:`stored_error` puts the exception's type in front.
    """
    if isinstance(exc, EhrReleaseError):
        text = exc.public()
    elif isinstance(exc, OSError):  # the reason, never the file name (ours, but long)
        text = exc.strerror or str(exc)
    else:
        text = "details in the run's flow log"
    return cap(text)


def stored_error(exc: BaseException) -> str:
    """``Type: message`` as a failed run, a retry or a refusal records it (no value)."""
    return f"{type(exc).__name__}: {stored_message(exc)}"


def cap(text: str, limit: int = MAX_STORED_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters cut]"
