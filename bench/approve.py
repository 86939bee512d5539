"""``approve`` → published beside a warm governed run, and a refused approve (issue 37
goal 3: the decision and its publication ≤ 0.5× a warm run; any refusal ≤ 1 s).

For one generated INFORMS-shaped file (``bench/disassociation.py``'s generator) the script
runs the real CLI in a fresh home under a temporary folder. It starts the local Prefect
server and makes a first run (neither counted). Then, ``--repeat`` times: a warm ``ehr-release run``
(Disassociation k=5 m=2, to ``awaiting_approval``; its wall), ``ehr-release approve`` of that
run (the decision and the publishing flow, to ``published``; its wall and the step lines it
prints on stderr), and ``approve`` once more on the decided run (refused; its wall). Each
row prints approve's wall next to the warm run's measured just before it, and their ratio.
Then it stops the server it started. ``--src`` runs the CLI on another source tree (a
worktree), so two branches can be measured in turn with one virtual environment:

    .venv/bin/python bench/approve.py [--records 58302] [--repeat 2] [--src PATH/src]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "ehr_release.cli"]
#: A step line of approve's stderr (``  ok render the final certificate …   3.1 s (total …``).
_STEP = re.compile(r"^\s+(?:ok|!!|✓|✗) (?P<label>.+?)\s{2,}(?P<secs>[\d.]+) s")


def timed(args: list[str], env: dict[str, str]) -> tuple[float, int, str, str]:
    """Wall seconds, exit code, stdout and stderr of one CLI command."""
    t0 = time.perf_counter()
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          check=False)
    return time.perf_counter() - t0, done.returncode, done.stdout, done.stderr


def warm_run(data: Path, env: dict[str, str]) -> tuple[float, str]:
    """One governed run to ``awaiting_approval``: its wall and run id."""
    wall, code, out, err = timed(["run", "--input", str(data), "--algorithm",
                                  "disassociation", "--param", "k=5", "--param", "m=2",
                                  "--requester", "steward.sam"], env)
    if code != 0:
        raise SystemExit(f"run failed ({code}):\n{err}")
    return wall, out.strip().splitlines()[-1]


def approve(run_id: str, env: dict[str, str]) -> tuple[float, int, str, str]:
    return timed(["approve", run_id, "--reviewer", "priv.officer", "--decision", "approve",
                  "--reason", "benchmark"], env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=58_302)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--src", type=Path, default=ROOT / "src",
                    help="source tree the CLI and its flow process import")
    args = ap.parse_args()
    src = str(args.src.resolve())
    sys.path.insert(0, src)
    sys.path.insert(0, str(ROOT / "bench"))
    with tempfile.TemporaryDirectory(prefix="ehr-approve-") as tmp:
        work = Path(tmp)
        home = work / "home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "EHR_RELEASE_"))}
        env.update(EHR_RELEASE_HOME=str(home), PYTHONPATH=src,
                   EHR_RELEASE_RELEASES_ROOT=str(home / "releases"))
        from disassociation import informs_like

        from ehr_release.samples.sample import write_sample

        data = write_sample(informs_like(args.records), work / "informs.csv")
        rows: list[tuple[float, float, float, str]] = []
        try:
            for _ in range(3):  # a loaded machine may need more than one start's timeout
                if timed(["server", "start"], env)[1] == 0:
                    break
            warm_run(data, env)  # its first run: not counted
            for _ in range(args.repeat):
                run_wall, run_id = warm_run(data, env)
                wall, code, out, err = approve(run_id, env)
                if code != 0 or not out.strip().endswith("published"):
                    raise SystemExit(f"approve did not publish ({code}):\n{err}")
                refused, code, _, refusal = approve(run_id, env)
                if code != 1 or "already decided" not in refusal:
                    raise SystemExit(f"expected a refusal, got {code}:\n{refusal}")
                rows.append((run_wall, wall, refused, err))
        finally:
            subprocess.run([*CLI, "server", "stop"], env=env, capture_output=True,
                           check=False)
    print(f"source {src}")
    print(f"approve → published beside a warm governed run, Disassociation k=5 m=2, "
          f"{args.records:,} INFORMS-shaped records (load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs)")
    print(f"{'':<8}{'warm run s':>11}{'approve s':>11}{'ratio':>7}{'refusal s':>11}")
    for i, (run_wall, wall, refused, _) in enumerate(rows, 1):
        print(f"{f'#{i}':<8}{run_wall:>11.2f}{wall:>11.2f}{wall / run_wall:>7.2f}"
              f"{refused:>11.2f}")
    median = statistics.median(w / r for r, w, _, _ in rows)
    print(f"median ratio approve / warm run: {median:.2f} (goal ≤ 0.5); refusal median "
          f"{statistics.median(r for _, _, r, _ in rows):.2f} s (goal ≤ 1)")
    print("approve's steps (last row):")
    for line in rows[-1][3].splitlines():
        if (found := _STEP.match(line)) is not None:
            print(f"  {found['label']:<46}{float(found['secs']):>6.1f} s")


if __name__ == "__main__":
    main()
