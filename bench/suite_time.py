"""How long ``make test`` takes and where its time goes (issue 37 goal 6: ≤ 5 min on 2 idle
cores with every test kept).

Runs the suite as ``make test`` does (the Makefile's ``TEST_ARGS``, ``EHR_RELEASE_TEST_MODE=1``)
with the :mod:`suite_probe` plugin, and prints:

* the run's wall time next to the goal, the CPU seconds of every process it reaped, and the
  CPU the whole machine spent meanwhile (``/proc/stat``: that includes the detached processes
  the suite starts — flow processes, Prefect servers — and anything else running);
* per test file, the largest first: its tests, its wall seconds summed over its tests, the
  worker's own CPU and the reaped children's;
* the split the goal turns on: tests that do their work in the worker (in-process) against
  tests whose work is in processes they start (the CLI end to end, the README's blocks, the
  examples); and the in-process tests' wall shared evenly over the workers — the suite's time
  if every process-driven test cost nothing;
* the machine's CPU by kind of process (:mod:`process_cpu`, sampled from ``/proc``: test
  workers, the harness's Prefect servers, home servers, flow processes, second processes,
  each CLI command, PostgreSQL, the browser, the machine's other programs), next to what the
  goal allows (every core busy for 300 s), and how much of that the in-process side alone
  — the workers and their harness's servers — already takes.

Each worker's lines are in a file of its own, so a worker's wall is the sum of its lines.
Extra arguments after ``--`` go to pytest (a file or ``-k`` to measure part of the suite)::

    .venv/bin/python bench/suite_time.py [--top 25] [--keep DIR] [-- tests/test_flow.py]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from process_cpu import IN_PROCESS_KINDS, ProcessSampler

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 300.0


def make_test_args() -> list[str]:
    """The pytest options ``make test`` uses, read from the Makefile (one source of truth)."""
    found = re.search(r"^TEST_ARGS \?= (.*)$", (ROOT / "Makefile").read_text(), re.M)
    if found is None:
        raise SystemExit("Makefile: no TEST_ARGS line")
    return shlex.split(found[1])


def machine_busy_s() -> float:
    """CPU seconds every core of this machine has spent busy since boot (``/proc/stat``)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def run_suite(probe_dir: Path, extra: list[str]) -> dict[str, Any]:
    """One run of the suite with the probe; its wall, reaped CPU, machine CPU, exit code."""
    env = {**os.environ, "EHR_RELEASE_TEST_MODE": "1", "SUITE_PROBE_DIR": str(probe_dir),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "bench"),
                                                       os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "pytest", *make_test_args(), "-p", "suite_probe", "-q",
               *extra]
    sampler = ProcessSampler()
    sampler.start()
    busy_before, started = machine_busy_s(), time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    lines = [line for line in process.stdout if line.strip()]
    (probe_dir / "pytest.out").write_text("".join(lines))  # a failure's message, with --keep
    tail = lines[-3:]
    # pytest -q's short summary: a failed or erroring test must be named, not only counted
    problems = [line.strip() for line in lines if line.startswith(("FAILED ", "ERROR "))]
    _, status, usage = os.wait4(process.pid, 0)
    wall, machine = time.monotonic() - started, machine_busy_s() - busy_before
    sampler.stop()
    return {"wall": wall, "reaped": usage.ru_utime + usage.ru_stime, "machine": machine,
            "exit": os.waitstatus_to_exitcode(status), "tail": "".join(tail).strip(),
            "problems": problems,
            "kinds": sampler.by_kind()}


def read_probe(probe_dir: Path) -> tuple[list[dict], int]:
    """Every test's line, and how many workers wrote them."""
    files = sorted(probe_dir.glob("probe-*.jsonl"))
    lines = [json.loads(line) for f in files for line in f.read_text().splitlines() if line]
    return lines, len(files)


def by_file(tests: list[dict]) -> dict[str, list[float]]:
    """Per test file: [tests, wall, own CPU, children's CPU]."""
    table: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for test in tests:
        row = table[test["id"].split("::")[0]]
        row[0] += 1
        row[1] += test["wall"]
        row[2] += test["self"]
        row[3] += test["children"]
    return table


def report(run: dict[str, Any], tests: list[dict], workers: int, top: int) -> None:
    print(f"make test's options ({' '.join(make_test_args())}), {len(tests)} tests, "
          f"{workers} workers, exit {run['exit']}: "
          f"{(run['tail'].splitlines() or ['(pytest printed nothing)'])[-1]}")
    print(f"wall {run['wall']:.1f} s (goal ≤ {GOAL_S:.0f} s: {run['wall'] / GOAL_S:.2f}×); "
          f"CPU reaped {run['reaped']:.0f} s; machine busy {run['machine']:.0f} CPU s "
          f"({run['machine'] / run['wall']:.2f} of {os.cpu_count()} cores)")
    for problem in run["problems"]:
        print(problem)
    print(f"\n{'file':<52} {'tests':>5} {'wall s':>8} {'own cpu':>8} {'children':>8}")
    table = by_file(tests)
    for name, (count, wall, own, children) in sorted(table.items(),
                                                     key=lambda kv: -kv[1][1])[:top]:
        print(f"{name:<52} {count:>5} {wall:>8.1f} {own:>8.1f} {children:>8.1f}")
    in_process = [t for t in tests if t["children"] <= t["self"]]
    driven = [t for t in tests if t["children"] > t["self"]]
    for label, group in (("in-process tests", in_process), ("process-driven tests", driven)):
        print(f"{label:<22} {len(group):>5} tests, wall {sum(t['wall'] for t in group):7.1f} s,"
              f" own CPU {sum(t['self'] for t in group):6.1f} s, children's "
              f"{sum(t['children'] for t in group):6.1f} s")
    floor = sum(t["wall"] for t in in_process) / max(workers, 1)
    print(f"the in-process tests' wall over {workers} workers: {floor:.0f} s "
          f"(the suite's time if every process-driven test cost nothing, before collection)")
    report_kinds(run)


def report_kinds(run: dict[str, Any]) -> None:
    """The machine's CPU by kind of process (:mod:`process_cpu`), next to what the goal
    allows: every core busy for the goal's whole wall."""
    kinds, cores = run["kinds"], os.cpu_count() or 1
    allowed = GOAL_S * cores
    print(f"\n{'CPU by kind of process (sampled from /proc)':<52} {'procs':>5} "
          f"{'CPU s':>8} {'share':>6}")
    for kind, (count, cpu) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        if cpu >= 0.5:
            print(f"{kind:<52} {count:>5} {cpu:>8.1f} {cpu / run['machine']:>6.1%}")
    sampled = sum(cpu for _, cpu in kinds.values())
    in_process = sum(kinds.get(kind, (0, 0.0))[1] for kind in IN_PROCESS_KINDS)
    print(f"sampled {sampled:.0f} of the machine's {run['machine']:.0f} CPU s (the rest: "
          f"processes shorter than the sampling interval)")
    print(f"the goal allows {allowed:.0f} CPU s ({cores} cores × {GOAL_S:.0f} s); the "
          f"in-process tests' side alone ({' + '.join(IN_PROCESS_KINDS)}) took "
          f"{in_process:.0f} CPU s = {in_process / allowed:.2f}× that")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="test files to list")
    parser.add_argument("--keep", type=Path,
                        help="keep the probe's lines and pytest's output in this folder")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="suite-probe-") as scratch:
        probe_dir = args.keep or Path(scratch)
        probe_dir.mkdir(parents=True, exist_ok=True)
        run = run_suite(probe_dir, args.pytest_args)
        tests, workers = read_probe(probe_dir)
    report(run, tests, workers, args.top)


if __name__ == "__main__":
    main()
