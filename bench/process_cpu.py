"""Where a machine's CPU went during a run, by kind of process (issue 37 goal 6's bench row).

``make test`` starts processes the test workers never reap — a CLI run's detached flow
process and its second process, a home's Prefect server — so neither the workers' own CPU
nor their children's shows them (:mod:`suite_probe`), and ``/proc/stat`` only gives the
machine's total. :class:`ProcessSampler` looks at every process in ``/proc`` a few times a
second and keeps each one's last CPU seconds (user + system, from ``/proc/PID/stat``), so
the total can be split by what the processes are (:func:`kind_of`, read off their command
lines). A process first seen at the sampler's first look counts only the CPU it spends
after it; a process that lives shorter than one interval is missed, which is why the
caller prints the machine's total beside the sum (the difference is what was missed).
Linux only; where ``/proc`` cannot be read the sampler sees nothing.
"""

from __future__ import annotations

import os
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

_PROC = Path("/proc")
_TICK = os.sysconf("SC_CLK_TCK")

#: Kinds whose CPU belongs to the in-process tests: the workers that run them (and collect
#: the suite) and the Prefect servers of the workers' test harness, which serve their flows.
IN_PROCESS_KINDS = ("pytest workers", "harness Prefect servers")

_CLI = re.compile(r"(?:bin/ehr-release|-m ehr_release\.cli)\s+(?P<command>[a-z][\w-]*)")


def kind_of(cmdline: str) -> str:
    """The kind of a process, from its command line (empty for the kernel's threads, and for
    a process whose command line is gone)."""
    if not cmdline.strip():
        return "kernel and unnamed"
    if "exec(eval(sys.stdin.readline()))" in cmdline:  # execnet: an xdist worker
        return "pytest workers"
    if "-m pytest" in cmdline or "/pytest " in cmdline:
        return "pytest controller"
    if "prefect.server.api.server:create_app" in cmdline:  # prefect_test_harness's server
        return "harness Prefect servers"
    if "prefect server start" in cmdline:
        return "home Prefect servers"
    if "ehr_release.flows.launch" in cmdline:
        return "flow processes"
    if "multiprocessing" in cmdline or "dask" in cmdline:
        return "second processes (aside, renderer, workers)"
    if found := _CLI.search(cmdline):
        return f"CLI {found['command']}"
    if "bench/" in cmdline:
        return "bench scripts (this one's sampler)"
    if "-m tests." in cmdline:
        return "test drivers (tests.*)"
    program = Path(cmdline.split()[0]).name
    if program.startswith("postgres"):
        return "PostgreSQL"
    if "chrom" in program or "playwright" in cmdline:
        return "Chromium and Playwright"
    if program.startswith("python"):
        return "other Python"
    return f"other: {program}"


def stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the process's name (which may hold spaces and
    parentheses), so that index 11 is its user CPU, 13 its reaped children's and 19 its start
    time; None once it is gone."""
    try:
        stat = Path(_PROC, str(pid), "stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()


def cpu_seconds(pid: int | str, *, own: bool = True, children: bool = False) -> float | None:
    """User + system CPU seconds of ``pid`` so far (``own``), of the children it has reaped
    (``children``), or of both; None once it is gone. The one reading of ``/proc`` CPU the
    benches share."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return _cpu(fields, own=own, children=children)


def _cpu(fields: list[bytes], *, own: bool = True, children: bool = False) -> float:
    ticks = (int(fields[11]) + int(fields[12]) if own else 0) + \
            (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / _TICK


@dataclass
class _Seen:
    cmdline: str
    baseline_cpu: float  # what it had spent before the first look; 0 if started since
    last_cpu: float


@dataclass
class ProcessSampler:
    """Samples ``/proc`` every ``interval_s`` from a thread of its own, between
    :meth:`start` and :meth:`stop`."""

    interval_s: float = 0.2
    _seen: dict[tuple[int, int], _Seen] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._look(first=True)
        self._thread = threading.Thread(target=self._run, name="process-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._look(first=False)

    def by_kind(self) -> dict[str, tuple[int, float]]:
        """Per kind: how many processes spent CPU while sampled, and their CPU seconds."""
        table: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for seen in self._seen.values():
            spent = seen.last_cpu - seen.baseline_cpu
            if spent <= 0:
                continue
            row = table[kind_of(seen.cmdline)]
            row[0] += 1
            row[1] += spent
        return {kind: (int(n), cpu) for kind, (n, cpu) in table.items()}

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._look(first=False)

    def _look(self, *, first: bool) -> None:
        try:
            entries = [e for e in os.scandir(_PROC) if e.name.isdigit()]
        except OSError:
            return
        for entry in entries:
            fields = stat_fields(entry.name)
            if fields is None:  # ended meanwhile
                continue
            cpu = _cpu(fields)
            key = (int(entry.name), int(fields[19]))  # pid and start time: pids are reused
            seen = self._seen.get(key)
            if seen is None:
                self._seen[key] = _Seen(_cmdline(entry.path), cpu if first else 0.0, cpu)
            else:
                seen.last_cpu = cpu
                if not seen.cmdline:  # read before exec filled it in
                    seen.cmdline = _cmdline(entry.path)


def _cmdline(path: str) -> str:
    try:
        raw = Path(path, "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()
