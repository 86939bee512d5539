"""How fast the CLI starts for the quick commands and how fast ``approve`` refuses (issue 37
goal 3: ``status``, ``list``, ``--help`` ≤ 0.3 s; any refusal ≤ 1 s).

For ``--help``, ``status --help``, ``list --help``, ``list``, ``status RUN`` (a run awaiting
approval) and ``status`` of an unknown run, and for three refused ``approve`` calls (a run
already decided, the requester deciding their own run, a decision word that is neither
approve nor reject), the script starts the CLI in a fresh interpreter ``--repeat`` times and
prints the median wall time and user CPU seconds (from ``wait4``; on a loaded machine the
CPU time is the steadier figure), next to the floors measured in the same run: a bare
interpreter, one that only imports Typer (every command pays it) and one that imports the
database models (SQLModel, SQLAlchemy, Pydantic: every command that reads the database
through them pays it; ``status`` and ``list`` on a SQLite file read it with the standard
library). Six runs are made through the storage API in a fresh home (no flow: a refusal
never reaches one). Each command runs once more than counted, first, so the trees' bytecode
caches are written as an installed package's are (``PYTHONDONTWRITEBYTECODE`` is dropped:
with it every start compiled the project's modules from source, ≈ 0.06 s more for a
database command). ``--src``
picks the source tree; ``--before`` measures a second tree (the code before a change)
alternately with it, case by case, so both columns share the machine's load:

    .venv/bin/python bench/cli_start.py [--src PATH/src] [--before OLD/src] [--repeat 5]
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
QUICK_S, REFUSAL_S = 0.3, 1.0

#: Six runs, as ``list`` finds them in a home in use: two parked for approval by steward.sam,
#: the first then rejected by olga (``status RUN`` reads the second), two whose flow died at
#: ``verified`` (shown stalled: their lease is read), one failed, one still awaiting approval.
SETUP = """
from ehr_release.storage import runs
from ehr_release.storage.models import DatasetRecord
from ehr_release.storage.runs import Status

PARKED = (Status.ANONYMIZED, Status.VERIFIED, Status.EVALUATED, Status.CERTIFIED,
          Status.AWAITING_APPROVAL)
ids = []
for i, path in enumerate([PARKED, PARKED, PARKED[:2], PARKED[:2], (), PARKED]):
    ds = DatasetRecord(fingerprint=f"{i:02x}" * 32, rows=10, codes=30, columns_json="{}",
                       source="bench")
    run = runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester="steward.sam",
                          algorithm="disassociation", parameters={"k": "5", "m": "2"},
                          out_dir="releases")
    for status in path:
        runs.transition(run.id, status, actor="flow")
    ids.append(run.id)
runs.decide(ids[0], reviewer="olga", decision="reject", reason="bench")
runs.fail_run(ids[4], actor="flow", error="bench")
print(*ids[:2])
"""


def timed(argv: list[str], env: dict[str, str], refusal: str | None) -> tuple[float, float]:
    """One process: (wall seconds, user CPU seconds); a refusal must exit 1 saying so."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if refusal is not None and (code != 1 or refusal not in err):
        raise SystemExit(f"expected a refusal ({refusal!r}), got exit {code}: {err}")
    if refusal is None and code != 0:
        raise SystemExit(f"{argv[3:]} failed ({code}): {err}")
    return wall, usage.ru_utime


def prepared(src: Path, home: Path) -> tuple[dict[str, str], list[str]]:
    """The environment for one source tree with its own home, and the ids of its rejected
    and its awaiting run."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "EHR_RELEASE_")) and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(src.resolve()), EHR_RELEASE_HOME=str(home),
               EHR_RELEASE_RELEASES_ROOT=str(home / "releases"))
    done = subprocess.run([sys.executable, "-c", SETUP], env=env, capture_output=True,
                          text=True, check=True)
    return env, done.stdout.split()


def cases(decided: str, awaiting: str) -> dict[str, tuple[list[str], str | None, float]]:
    """Name: (arguments, the refusal's words or None, goal seconds)."""
    def approve(run_id: str, reviewer: str, decision: str = "approve") -> list[str]:
        return ["approve", run_id, "--reviewer", reviewer, "--decision", decision,
                "--reason", "bench"]

    return {"--help": (["--help"], None, QUICK_S),
            "status --help": (["status", "--help"], None, QUICK_S),
            "list --help": (["list", "--help"], None, QUICK_S),
            "list": (["list"], None, QUICK_S),
            "status RUN": (["status", awaiting], None, QUICK_S),
            "status unknown": (["status", "rel-none"], "no release run", QUICK_S),
            "refused: decided": (approve(decided, "priv.officer"), "already decided",
                                 REFUSAL_S),
            "refused: own run": (approve(awaiting, "steward.sam"), "may not decide it",
                                 REFUSAL_S),
            "refused: word": (approve(awaiting, "priv.officer", "maybe"),
                              "decision must be", REFUSAL_S)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument("--before", type=Path, default=None,
                    help="a second source tree, measured alternately with --src")
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args()
    trees = {"after": opts.src, **({"before": opts.before} if opts.before else {})}
    with tempfile.TemporaryDirectory(prefix="ehr-cli-start-") as tmp:
        ready = {name: prepared(src, Path(tmp) / name) for name, src in trees.items()}
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; median of "
              f"{opts.repeat}; " + "; ".join(f"{k} = {v}" for k, v in trees.items()))
        print(f"{'command':<20} {'goal s':>6}" + "".join(
            f" {name + ' wall':>12} {name + ' user':>12}" for name in reversed(trees)))
        floors = {"python (floor)": (["-c", "pass"], None, 0.0),
                  "import typer (floor)": (["-c", "import typer"], None, 0.0),
                  "import models (floor)": (["-c", "import ehr_release.storage.models"],
                                            None, 0.0)}
        table = {**floors, **cases(*ready["after"][1])}
        for name, (args, refusal, goal) in table.items():
            measured: dict[str, list[tuple[float, float]]] = {t: [] for t in trees}
            for i in range(opts.repeat + 1):  # the first, not counted, writes bytecode
                for tree, (env, ids) in ready.items():  # alternately: one load for both
                    own = cases(*ids)[name][0] if name in cases(*ids) else args
                    argv = ([sys.executable, *own] if name in floors
                            else [sys.executable, "-m", "ehr_release.cli", *own])
                    result = timed(argv, env, refusal)
                    if i:
                        measured[tree].append(result)
            row = f"{name:<20} {goal or '':>6}"
            for tree in reversed(trees):
                wall = statistics.median(r[0] for r in measured[tree])
                user = statistics.median(r[1] for r in measured[tree])
                row += f" {wall:>12.3f} {user:>12.3f}"
            print(row)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
