"""The run's own INFO lines in Prefect's log: what each stage did, in figures.

Prefect logs its own state changes only ("Finished in state Completed()"): a three-minute
run left fifteen such lines and nothing of the work (issue 34 finding 6). Each stage writes
one line through the run logger — counts, sizes, seconds, parameter names and values, file
names of the release, verdicts — and never a value of the data (a patient id, a code, an
age), because Prefect keeps its logs outside the run's private home. The lines are built
from the same value-free figures as the stage artifacts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

#: Where a line goes outside a Prefect run (a task's function called directly in a test).
_FALLBACK = logging.getLogger("ehr_release.flow")


def stage_log(stage: str, message: str) -> None:
    """One INFO line ``<stage>: <message>`` in the current flow or task run's log."""
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        logger: logging.Logger | logging.LoggerAdapter = get_run_logger()
    except MissingContextError:
        logger = _FALLBACK
    logger.info("%s: %s", stage, message)


def since(started: float) -> str:
    """Seconds since ``started`` (a :func:`time.perf_counter` reading), as ``12.3 s``."""
    return f"{time.perf_counter() - started:.1f} s"


def size(n_bytes: int) -> str:
    """A byte count for a person: ``1,234 bytes``, ``3.4 MB``."""
    if n_bytes < 10_000:
        return f"{n_bytes:,} bytes"
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes:,} bytes"  # pragma: no cover - unreachable


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``3 files``."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def names(items: Iterable[str]) -> str:
    """Names joined for a line: ``a, b and c``."""
    listed = list(items)
    return (", ".join(listed[:-1]) + " and " + listed[-1]) if len(listed) > 1 else \
        "".join(listed)
