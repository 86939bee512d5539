"""Worker processes for the one stage threads cannot speed up: ArtUC's GenDiag calls.

GenDiag is interpreted Python, so under the GIL threads would only take turns. A process
pool receives the code table once per worker (its initializer) and afterwards only cluster
rows go out and results come back.

Workers are spawned, never forked: the caller may be a Prefect flow with threads running,
and a forked child can inherit a lock one of them held at that moment.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

import numpy as np

from ehr_release.algorithms.artuc.artuc import GenDiagRunner, in_process
from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.gendiag import CodeGeneralization, gendiag
from ehr_release.algorithms.artuc.merging import GenDiagMany

#: From this many records on, workers pay for their start (about a second). Measured on 2
#: CPUs, EHRD-like data: 10,419 records 3.9 → 3.5 s, 20,838 records 8.0 → 5.7 s.
MIN_RECORDS = 20_000

_table: CodeTable | None = None
_k = _m = 0


def usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _start_worker(table: CodeTable, k: int, m: int) -> None:
    global _table, _k, _m
    _table, _k, _m = table, k, m


def _gendiag_here(rows: np.ndarray) -> CodeGeneralization:
    assert _table is not None, "worker started without its code table"
    return gendiag(_table, rows, k=_k, m=_m)


@contextmanager
def gendiag_processes(table: CodeTable, k: int, m: int, *,
                      workers: int | None = None) -> Iterator[GenDiagMany]:
    """A :data:`~ehr_release.algorithms.artuc.artuc.GenDiagRunner` on worker processes.

    A batch of one runs here (no round trip). Larger batches are handed out one cluster at
    a time, largest first (GenDiag's time grows faster than the cluster), so the batch does
    not end waiting on one big cluster a worker picked up last.
    """
    count = workers or usable_cpus()
    context = multiprocessing.get_context("spawn")
    with in_process(table, k, m) as here, ProcessPoolExecutor(
            count, mp_context=context, initializer=_start_worker,
            initargs=(table, k, m)) as pool:
        def many(rows: Sequence[np.ndarray]) -> list[CodeGeneralization]:
            if len(rows) < 2:
                return here(rows)
            order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
            done = dict(zip(order, pool.map(_gendiag_here, [rows[i] for i in order]),
                            strict=True))
            return [done[i] for i in range(len(rows))]
        yield many


def gendiag_runner_for(records: int) -> GenDiagRunner:
    """Worker processes for data big enough to pay for them, on a machine with two CPUs or
    more; otherwise this process.

    Also this process when it is daemonic — a Dask worker running the flow's tasks is, and
    a daemonic process may not start children (the stage is then already off the main
    process, and Dask spreads stages over its workers instead).
    """
    if multiprocessing.current_process().daemon:
        return in_process
    if records >= MIN_RECORDS and usable_cpus() > 1:
        return gendiag_processes
    return in_process
