"""How fast ``ehr-release run`` refuses bad input from a cold process (issue 18 goal 1).

The goal: the first answer on bad input in under a second. For each case — (a) a missing
file, (b) a malformed CSV (a code that is not ICD-9 on row 2), (c) a bad parameter (k=0) —
the script starts the CLI in a fresh interpreter, ``--repeat`` times, and prints the median
time until the ``error:`` line appears on stderr (what the steward waits for), until the
process exits (the audit event is written by then), and its CPU seconds (user + system,
from ``wait4``). ``--src`` picks the source tree, so two branches can be measured in turn
in one session:

    .venv/bin/python bench/refusal.py [--src PATH/src] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def refuse(args: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """One refused run: seconds to the error line, to exit, CPU seconds, the error line."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ehr_release.cli", "run", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    first, line = float("nan"), ""
    for raw in proc.stderr:
        if raw.startswith(b"error:") and not line:
            first, line = time.perf_counter() - t0, raw.decode().strip()
    _, status, usage = os.wait4(proc.pid, 0)
    done = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 1 or not line:
        raise SystemExit(f"expected a refusal, got exit {status} and {line!r}")
    return first, done, usage.ru_utime + usage.ru_stime, line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ehr-refusal-") as tmp:
        work = Path(tmp)
        (work / "bad.csv").write_text("patient_id,codes\nA,401.9\nB,999.999\n")
        (work / "good.csv").write_text("patient_id,codes\nA,401.9\nB,250.00\n")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "EHR_RELEASE_"))}
        env.update(PYTHONPATH=str(opts.src.resolve()), EHR_RELEASE_HOME=str(work / "home"),
                   EHR_RELEASE_RELEASES_ROOT=str(work))
        common = ["--algorithm", "disassociation", "--requester", "steward.sam"]
        cases = {"missing file": ["--input", str(work / "missing.csv"), "--param", "k=5"],
                 "malformed CSV": ["--input", str(work / "bad.csv"), "--param", "k=5"],
                 "bad parameter": ["--input", str(work / "good.csv"), "--param", "k=0"]}
        refuse(cases["bad parameter"] + common, env)  # creates the home and its database
        print(f"source {opts.src}, median of {opts.repeat} (load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
        print(f"{'case':<15}{'error line s':>13}{'exit s':>9}{'CPU s':>8}  message")
        for name, args in cases.items():
            runs = [refuse(args + common, env) for _ in range(opts.repeat)]
            first, done, cpu = (statistics.median(r[i] for r in runs) for i in range(3))
            print(f"{name:<15}{first:>13.2f}{done:>9.2f}{cpu:>8.2f}  {runs[0][3][:70]}")


if __name__ == "__main__":
    main()
