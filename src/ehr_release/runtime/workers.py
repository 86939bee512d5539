"""Where ArtUC's GenDiag calls run: threads for the compiled loop, processes for Python's.

GenDiag's compiled loop (:mod:`~ehr_release.algorithms.artuc.gendiag_kernel`, m ≤ 2) releases
the GIL, so a batch of calls spreads over threads of this process at no start-up cost and
with nothing copied (:func:`gendiag_threads`). The interpreted loop (m > 2, or a cluster too
large for the kernel) would only take turns under the GIL: for it a process pool receives the
code table once per worker (its initializer) and afterwards only cluster rows go out and
results come back (:func:`gendiag_processes`).

Workers are spawned, never forked: the caller may be a Prefect flow with threads running,
and a forked child can inherit a lock one of them held at that moment.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from ehr_release.algorithms.artuc.artuc import GenDiagRunner, in_process
from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.gendiag import (
    CodeGeneralization,
    ULBatch,
    gendiag,
    runs_compiled,
)
from ehr_release.algorithms.artuc.merging import GenDiagCalls, GenDiagMany
from ehr_release.runtime.cpus import usable_cpus

#: From this many records on, workers pay for their start (about a second). Measured on 2
#: CPUs, EHRD-like data: 10,419 records 3.9 → 3.5 s, 20,838 records 8.0 → 5.7 s.
MIN_RECORDS = 20_000
#: Shares of a batch's UL calls per thread: a few, so a thread slowed by other work
#: does not leave the others waiting at the batch's end.
SHARES_PER_THREAD = 4

_table: CodeTable | None = None
_k = _m = 0


def _start_worker(table: CodeTable, k: int, m: int) -> None:
    global _table, _k, _m
    _table, _k, _m = table, k, m


def _gendiag_here(rows: np.ndarray) -> CodeGeneralization:
    assert _table is not None, "worker started without its code table"
    return gendiag(_table, rows, k=_k, m=_m)


def _largest_first(rows: Sequence[np.ndarray]) -> list[int]:
    """Positions of ``rows``, largest cluster first (ties: in order). GenDiag's time grows
    faster than the cluster, so work is handed out in this order: a batch does not end
    waiting on one big cluster picked up last."""
    return sorted(range(len(rows)), key=lambda i: -len(rows[i]))


def _spread(rows: Sequence[np.ndarray], here: GenDiagMany,
            run_all: Callable[[list[np.ndarray]], Iterator[CodeGeneralization]]
            ) -> list[CodeGeneralization]:
    """A batch through ``run_all`` (a pool's ``map``), results in the batch's order; a batch
    of one runs ``here`` (no hand-over). Handed out :func:`_largest_first`."""
    if len(rows) < 2:
        return here(rows)
    order = _largest_first(rows)
    done = dict(zip(order, run_all([rows[i] for i in order]), strict=True))
    return [done[i] for i in range(len(rows))]


def _shares(rows: Sequence[np.ndarray], count: int) -> list[np.ndarray]:
    """Positions of ``rows`` dealt into ``count`` shares of about equal work: in turn,
    :func:`_largest_first`."""
    order = np.array(_largest_first(rows), dtype=np.int64)
    return [share for share in (order[i::count] for i in range(count)) if len(share)]


@contextmanager
def gendiag_threads(table: CodeTable, k: int, m: int, *,
                    workers: int | None = None) -> Iterator[GenDiagCalls]:
    """A :data:`~ehr_release.algorithms.artuc.artuc.GenDiagRunner` on threads of this
    process, for tables whose calls all take the compiled loop (it runs without the GIL).

    A batch of one runs here. Each call allocates its own arrays, so threads share nothing
    but the read-only code table. ULs are computed in :data:`SHARES_PER_THREAD` compiled
    calls per thread, each a share of the batch (:class:`ULBatch`): a thread takes the GIL
    back once per share, not once per cluster — in a comparison, other candidates run Python
    in this process, and each take can wait for the interpreter's switch interval.
    """
    count = workers or usable_cpus()
    with in_process(table, k, m) as here, ThreadPoolExecutor(
            count, thread_name_prefix="gendiag") as pool:
        def one(rows: np.ndarray) -> CodeGeneralization:
            return gendiag(table, rows, k=k, m=m)

        def uls(rows: Sequence[np.ndarray]) -> list[float]:
            if len(rows) < 2:
                return here.uls(rows)
            batch = ULBatch(table, rows, k, m)
            list(pool.map(batch.run, _shares(rows, count * SHARES_PER_THREAD)))
            return batch.uls()

        yield GenDiagCalls(
            lambda rows: _spread(rows, here.results, lambda batch: pool.map(one, batch)), uls)


@contextmanager
def gendiag_processes(table: CodeTable, k: int, m: int, *,
                      workers: int | None = None) -> Iterator[GenDiagCalls]:
    """A :data:`~ehr_release.algorithms.artuc.artuc.GenDiagRunner` on worker processes.

    A batch of one runs here (no round trip). Larger batches are handed out one cluster at
    a time, largest first.
    """
    count = workers or usable_cpus()
    context = multiprocessing.get_context("spawn")
    with in_process(table, k, m) as here, ProcessPoolExecutor(
            count, mp_context=context, initializer=_start_worker,
            initargs=(table, k, m)) as pool:
        def many(rows: Sequence[np.ndarray]) -> list[CodeGeneralization]:
            return _spread(rows, here.results, lambda batch: pool.map(_gendiag_here, batch))

        yield GenDiagCalls(many, lambda rows: [g.ul for g in many(rows)])


@contextmanager
def gendiag_parallel(table: CodeTable, k: int, m: int) -> Iterator[GenDiagCalls]:
    """Threads when every call takes the compiled loop; otherwise worker processes for
    data big enough to pay for their start (:data:`MIN_RECORDS`), else this process."""
    if runs_compiled(table, k, m):
        runner = gendiag_threads
    elif len(table.indptr) - 1 >= MIN_RECORDS:
        runner = gendiag_processes
    else:
        runner = in_process
    with runner(table, k, m) as calls:
        yield calls


def gendiag_runner() -> GenDiagRunner:
    """:func:`gendiag_parallel` on a machine with two CPUs or more; otherwise this process.

    Also this process when it is daemonic — a Dask worker running the flow's tasks is, and
    a daemonic process may not start children (the stage is then already off the main
    process, and Dask spreads stages over its workers instead).
    """
    if multiprocessing.current_process().daemon or usable_cpus() < 2:
        return in_process
    return gendiag_parallel
