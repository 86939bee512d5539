"""The home's local Prefect server, run as ``prefect server start`` with one change: Python's
cyclic garbage collector runs in a thread of its own, never on the server's event loop.

Why (issue 37, found with a statement trace and ``py-spy dump --native`` of a stalled
server): eight first runs at once in a fresh SQLite home stalled for 60 s, or 120 s, in about
one drive in six. The server's event loop thread was blocked in the collector: it was
clearing an unreachable ``sqlite3.Cursor`` (``gc_collect_main`` → ``cursor_clear`` →
``sqlite3_reset``), which waits for its connection's mutex. That connection's own thread held
the mutex while it waited, in ``sqlite3_step``, for SQLite's write lock; the transaction
holding the write lock could not commit, because its coroutine needs the event loop. Nothing
moved until the waiting statement gave up at Prefect's hard-coded ``PRAGMA busy_timeout =
60000``. Collected by a thread of its own, the same cursor only blocks that thread (the
reset releases the GIL while it waits), the loop lets the writer commit, and the waiting
statement gets the lock and lets go of the mutex.

The collector keeps CPython's own thresholds: the thread collects a generation when the
interpreter's counts say the automatic collector would have.

Run as ``python -m ehr_release.flows.prefect_server prefect server start ...``: the
arguments after the module are Prefect's command line, ``prefect`` included, so the process
reads as a ``prefect server start`` to whoever looks for one (``server stop``, the health
checks).
"""

from __future__ import annotations

import gc
import sys
import threading
import time

#: How often the collector thread looks at the interpreter's allocation counts.
COLLECT_POLL_S = 0.05


def collect_off_the_loop(poll_s: float = COLLECT_POLL_S) -> threading.Thread:
    """Turn off the automatic collector and collect from a daemon thread instead, by the
    thresholds the automatic collector uses (:func:`due_generation`)."""
    gc.disable()

    def collect() -> None:
        while True:
            time.sleep(poll_s)
            generation = due_generation(gc.get_count(), gc.get_threshold())
            if generation is not None:
                gc.collect(generation)

    thread = threading.Thread(target=collect, name="gc-off-the-loop", daemon=True)
    thread.start()
    return thread


def due_generation(counts: tuple[int, int, int],
                   thresholds: tuple[int, ...]) -> int | None:
    """The generation CPython's automatic collector would collect now, or None: nothing until
    the allocations reach the youngest generation's threshold, then the oldest generation
    whose count has reached its own (its count is the collections of the one below it)."""
    if not thresholds[0] or counts[0] < thresholds[0]:
        return None
    return max(generation for generation, (count, threshold)
               in enumerate(zip(counts, thresholds, strict=False))
               if threshold and count >= threshold)


def main(argv: list[str]) -> None:
    """Run Prefect's command line ``argv`` (``prefect server start ...``) with the
    collector off the event loop."""
    if argv[:1] != ["prefect"]:
        raise SystemExit("usage: python -m ehr_release.flows.prefect_server prefect server "
                         "start [options]")
    collect_off_the_loop()
    from prefect.cli import app

    sys.argv = argv
    app()


if __name__ == "__main__":
    main(sys.argv[1:])
