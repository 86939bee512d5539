"""The home's Prefect server collects garbage off its event loop (issue 37: the 60 s stall).

A stalled server's event loop thread was found blocked in Python's collector, clearing an
unreachable ``sqlite3.Cursor`` whose connection's mutex another thread held while it waited
for a write lock that only a coroutine on that loop could release
(:mod:`ehr_release.flows.prefect_server`). The model here: a finalizer that waits for the
loop. Collected on the loop's thread it can never finish; collected by the collector
thread it finishes as soon as the loop gets to it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from ehr_release.flows import server
from ehr_release.flows.prefect_server import due_generation

THRESHOLDS = (700, 10, 10)


def test_nothing_is_due_below_the_youngest_threshold():
    assert due_generation((699, 9, 9), THRESHOLDS) is None
    assert due_generation((0, 50, 50), THRESHOLDS) is None


def test_the_oldest_generation_over_its_threshold_is_due():
    assert due_generation((700, 0, 0), THRESHOLDS) == 0
    assert due_generation((800, 10, 3), THRESHOLDS) == 1
    assert due_generation((800, 10, 10), THRESHOLDS) == 2
    assert due_generation((800, 2, 10), THRESHOLDS) == 2


def test_a_collector_switched_off_by_threshold_zero_stays_off():
    assert due_generation((10_000, 100, 100), (0, 10, 10)) is None


_LOOP_WITH_BLOCKING_FINALIZER = textwrap.dedent("""
    import asyncio, gc, sys, threading

    if sys.argv[1] == "off-the-loop":
        from ehr_release.flows.prefect_server import collect_off_the_loop
        collect_off_the_loop()
    assert gc.isenabled() == (sys.argv[1] == "automatic")

    released = threading.Event()   # set only by a coroutine on the loop
    finalized_in = []

    class Cycle:
        def __init__(self):
            self.me = self
        def __del__(self):
            finalized_in.append(threading.current_thread().name)
            if not released.wait(timeout=2):
                finalized_in.append("timed out")

    async def main():
        Cycle()  # unreachable at once: only a collection frees it
        kept = []
        for _ in range(400):  # allocate, and give the loop turns, until it is finalized
            if finalized_in:
                released.set()
            kept.append([[] for _ in range(200)])  # live objects: collections come due
            await asyncio.sleep(0.005)
            if len(finalized_in) and released.is_set():
                break
        await asyncio.sleep(0.05)

    asyncio.run(main())
    print(",".join(finalized_in))
""")


def _finalizer_thread(mode: str) -> str:
    done = subprocess.run([sys.executable, "-c", _LOOP_WITH_BLOCKING_FINALIZER, mode],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_collector_thread_finalizes_while_the_loop_runs():
    assert _finalizer_thread("off-the-loop") == "gc-off-the-loop"


def test_the_automatic_collector_would_block_the_loop():
    """The control: the same program with the automatic collector finalizes on the loop's
    thread, where the wait can only time out."""
    assert _finalizer_thread("automatic") == "MainThread,timed out"


def test_the_home_starts_its_server_through_the_collector_wrapper():
    command = server.server_command(4200)
    assert command[1:3] == ["-m", "ehr_release.flows.prefect_server"]
    assert command[3:6] == ["prefect", "server", "start"]  # what _is_our_server looks for
