"""How fast the CLI starts for the quick commands (issue 37 goal 3: ≤ 0.3 s).

For ``--help``, ``status --help``, ``list --help``, ``list`` and ``status RUN`` (a run id
that does not exist: the database is opened and asked, the answer is one line), the script
starts the CLI in a fresh interpreter ``--repeat`` times and prints the median wall time
and CPU seconds (user + system, from ``wait4``), next to the floor measured in the same
run: a bare interpreter and one that only imports Typer (every command pays it). ``--src``
picks the source tree, so two branches can be measured in turn in one session:

    .venv/bin/python bench/cli_start.py [--src PATH/src] [--repeat 7]
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
GOAL_S = 0.3


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One process: (wall seconds, CPU seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument("--repeat", type=int, default=7)
    opts = ap.parse_args()
    cli = [sys.executable, "-m", "ehr_release.cli"]
    cases = {"python (floor)": [sys.executable, "-c", "pass"],
             "import typer (floor)": [sys.executable, "-c", "import typer"],
             "--help": [*cli, "--help"],
             "status --help": [*cli, "status", "--help"],
             "list --help": [*cli, "list", "--help"],
             "list": [*cli, "list"],
             "status RUN": [*cli, "status", "rel-none"]}
    with tempfile.TemporaryDirectory(prefix="ehr-cli-start-") as tmp:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "EHR_RELEASE_"))}
        env.update(PYTHONPATH=str(opts.src.resolve()), EHR_RELEASE_HOME=str(Path(tmp) / "h"))
        subprocess.run([*cli, "list"], env=env, capture_output=True, check=True)  # the site
        print(f"load average {os.getloadavg()[0]:.2f}; median of {opts.repeat}; goal "
              f"≤ {GOAL_S} s")
        print(f"{'command':<22} {'wall s':>7} {'CPU s':>7}")
        for name, argv in cases.items():
            runs = [timed(argv, env) for _ in range(opts.repeat)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"{name:<22} {wall:>7.3f} {cpu:>7.3f}")


if __name__ == "__main__":
    main()
