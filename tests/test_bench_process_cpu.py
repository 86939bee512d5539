"""The suite bench's CPU accounting by kind of process (``bench/process_cpu.py``, issue 37
goal 6): the kinds are read off real command lines of the suite's processes, and the
sampler attributes a detached process's CPU, which no worker reaps."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from process_cpu import ProcessSampler, cpu_seconds, kind_of  # noqa: E402

PY = "/work/x/.venv/bin/python"


@pytest.mark.parametrize(("cmdline", "kind"), [
    (f"{PY} -u -c import sys;exec(eval(sys.stdin.readline()))", "pytest workers"),
    (f"{PY} -m pytest -n auto --maxprocesses=3", "pytest controller"),
    (f"{PY} -m uvicorn --app-dir x --factory prefect.server.api.server:create_app --host 1",
     "harness Prefect servers"),
    (f"{PY} -m ehr_release.flows.prefect_server prefect server start --host 127.0.0.1",
     "home Prefect servers"),
    (f"{PY} -m ehr_release.flows.launch /h/runs/rel-1/request.json", "flow processes"),
    (f"{PY} -B -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=7)",
     "second processes (aside, renderer, workers)"),
    (f"{PY} /work/x/.venv/bin/ehr-release approve rel-1 --reviewer r", "CLI approve"),
    (f"{PY} -m ehr_release.cli run --input x.csv", "CLI run"),
    (f"{PY} -m tests.crash_driver req.json after:verified", "test drivers (tests.*)"),
    ("postgres: test test 127.0.0.1(5432) idle", "PostgreSQL"),
    ("/usr/lib/chromium/chromium --headless", "Chromium and Playwright"),
    ("/usr/sbin/mosquitto -c /etc/mosquitto.conf", "other: mosquitto"),
    ("", "kernel and unnamed"),
])
def test_each_kind_is_read_off_its_command_line(cmdline: str, kind: str) -> None:
    assert kind_of(cmdline) == kind


def test_a_process_no_one_here_reaps_is_counted_with_its_cpu() -> None:
    """A detached child that burns about half a CPU second is found, with that CPU."""
    sampler = ProcessSampler(interval_s=0.05)
    sampler.start()
    spin = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.5: pass\n" \
           "time.sleep(0.3)"
    child = subprocess.Popen([sys.executable, "-c", spin, "-m", "tests.spin_marker"],
                             start_new_session=True)
    child.wait(timeout=30)
    time.sleep(0.1)
    sampler.stop()
    count, cpu = sampler.by_kind()["test drivers (tests.*)"]
    assert count == 1
    assert 0.4 <= cpu <= 1.5


def test_cpu_seconds_reads_own_and_reaped_childrens_cpu() -> None:
    """The benches' one reading of a process's CPU: its own, agreeing with the process's own
    clock, and that of the children it reaped, counted apart or together."""
    pid = os.getpid()
    own = cpu_seconds(pid)
    assert own is not None and abs(own - time.process_time()) < 0.1
    before = cpu_seconds(pid, own=False, children=True)
    spin = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass"
    subprocess.run([sys.executable, "-c", spin], check=True, timeout=30)
    reaped = cpu_seconds(pid, own=False, children=True)
    assert before is not None and reaped is not None and reaped - before >= 0.25
    both = cpu_seconds(pid, children=True)
    assert both is not None and both >= reaped
    assert cpu_seconds(2**22 + 1) is None  # no such process
