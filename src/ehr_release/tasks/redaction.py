"""What Prefect may learn of a failure: never a patient value.

Prefect stores a failed task's or flow's exception in its database twice — the state message
(``Task run encountered an exception KeyError: 'MRN-…'``) and the log line with its traceback
— and shows both in its UI. A bug's message can quote anything it touched (a ``KeyError`` on a
patient id, pandas naming a cell, SQLAlchemy listing a statement's parameters), and our own
errors may carry a terminal-only ``detail`` (:class:`~ehr_release.core.errors.InputError`). So every
task and flow body is wrapped by :func:`redacted`, which lets Prefect see only:

* our own errors, their stored text (:meth:`~ehr_release.core.errors.EhrReleaseError.public`);
* an operating-system error as raised (its reason and our own path: what an operator must
  act on);
* anything else as :class:`RedactedError`: its type and where it was raised (file, line,
  function — code, not data), its message withheld — but for a database that failed as a
  service, the driver's first line (``server closed the connection``, ``database is locked``);

each without the exceptions it was raised from (a cause's message could quote data too).
The retry policy still sees whether the failure was transient (:attr:`RedactedError.transient`).
"""

from __future__ import annotations

import functools
import inspect
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from ehr_release.core.errors import EhrReleaseError, cap

P = ParamSpec("P")
R = TypeVar("R")

#: Marks a function :func:`redacted` wrapped (the conformance test looks for it).
MARK = "__ehr_redacted__"


class RedactedError(EhrReleaseError):
    """A failure that is not ours, as it may be stored: its type and where, not its words."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "(no traceback)"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno} in {last.name}"


def _connection_reason(exc: Exception) -> str | None:
    """The driver's first line for a database that failed as a service (down, refusing,
    locked): what an operator must act on. Never the statement or its parameters, which
    SQLAlchemy appends on later lines, nor any other database error's words (a type or
    constraint error can quote the value it refused)."""
    from sqlalchemy.exc import OperationalError

    if not isinstance(exc, OperationalError) or exc.orig is None:
        return None
    first = str(exc.orig).strip().splitlines()
    return cap(first[0], 300) if first else None


#: (stored text, full text) of the last error of ours redacted in this process: the full
#: text may quote the data, so it is never stored, only sent to the steward's terminal by
#: the flow process's launcher (:func:`ehr_release.flows.launch.tell_terminal`). A flow
#: process runs one request, so the last is the run's.
_for_terminal: list[tuple[str, str] | None] = [None]


def terminal_text(exc: BaseException) -> str | None:
    """The full text of ``exc`` (one of ours, as redacted here) for the terminal, or None."""
    kept = _for_terminal[0]
    if kept is None or not isinstance(exc, EhrReleaseError) or exc.public() != kept[0]:
        return None
    return kept[1]


def redact(exc: Exception) -> Exception:
    """``exc`` as Prefect may store it (see the module docstring)."""
    from ehr_release.tasks.transient import TRANSIENT  # sqlalchemy: imported only on failure

    if isinstance(exc, EhrReleaseError) and not isinstance(exc, RedactedError):
        if str(exc) != exc.public():  # kept in this process for the terminal only
            _for_terminal[0] = (exc.public(), str(exc))
        exc.args = (cap(exc.public()),)
        if hasattr(exc, "detail"):
            exc.detail = None
        clean: Exception = exc
    elif isinstance(exc, OSError | RedactedError) or \
            type(exc).__module__.split(".")[0] == "prefect":
        clean = exc  # already clean; Prefect's own signals (abort, pause, cancel) pass as-is
    else:
        reason = _connection_reason(exc)
        said = f": {reason}" if reason else " (its message is withheld: it may quote " \
            "patient data)"
        clean = RedactedError(f"{type(exc).__name__} at {_where(exc)}{said}",
                              transient=isinstance(exc, TRANSIENT))
    clean.__cause__ = None
    clean.__context__ = None
    clean.__suppress_context__ = True
    return clean


def redacted(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn``, whose failures reach Prefect redacted; put it under ``@task`` / ``@flow``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - redacted and raised again, never swallowed
            raise redact(exc) from None

    # Prefect (through pydantic) builds its parameter model from the wrapper's signature,
    # resolving string annotations in the wrapper's globals: hand it ``fn``'s signature with
    # the annotations resolved where ``fn`` was written.
    wrapper.__signature__ = inspect.signature(fn, eval_str=True)  # type: ignore[attr-defined]
    setattr(wrapper, MARK, True)
    return wrapper
