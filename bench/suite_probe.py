"""A pytest plugin that records each test's wall and CPU time (issue 37 goal 6's bench row).

Loaded by :mod:`suite_time` (``-p suite_probe`` with ``bench/`` on ``PYTHONPATH``), never by
``make test`` itself. Each xdist worker appends one JSON line per test to a file of its own in
``SUITE_PROBE_DIR``: the test's id, its wall seconds (set-up, call and tear-down), the CPU
seconds of the worker itself and of the child processes it reaped meanwhile. A detached
process (a CLI run's flow process, a home's Prefect server) is not reaped by the worker, so
its CPU is not in any line: the table then shows the test as waiting, which is why the bench
prints wall time first and CPU only beside it.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

_out: IO[str] | None = None


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _sink() -> IO[str]:
    global _out
    if _out is None:
        folder = Path(os.environ.get("SUITE_PROBE_DIR", "."))
        _out = (folder / f"probe-{os.getpid()}.jsonl").open("a", encoding="utf-8")
    return _out


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    started = time.monotonic()
    own_before, children_before = _cpu()
    yield
    own_after, children_after = _cpu()
    sink = _sink()
    sink.write(json.dumps({"id": item.nodeid, "wall": time.monotonic() - started,
                           "self": own_after - own_before,
                           "children": children_after - children_before}) + "\n")
    sink.flush()
