"""First use of a compiled kernel against a warm run (issue 37 goal 4, issue 34 finding 2).

ArtUC's GenDiag loop is compiled by numba on its first call; issue 34 measured the first ArtUC
run after install at 43 s (idle, 8 records) and 173.7 s (loaded, 100 patients) against 10.3 s
warm. The goal: the first use ≤ 2× a warm run, from a fresh clone — ``make install`` runs
``ehr-release warm-up`` (:mod:`ehr_release.registry.warm_up`), which compiles the kernels into
numba's
cache once.

Each row is a fresh process anonymizing the shipped MIMIC-III demo (``examples/data``) with
ArtUC and the example's configuration, as a release's anonymize stage does, with an empty
numba cache (``NUMBA_CACHE_DIR`` in a temporary folder) standing for a fresh clone:

* ``before``: first use without the warm-up (compiles), then a warm run;
* ``after``: the warm-up (as ``make install`` runs it), then the first use, then a warm run.

    .venv/bin/python bench/first_use.py [--warmed NUMBA_CACHE_DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "data" / "mimic3-demo"
CONFIG = ROOT / "examples" / "artuc-mimic" / "config.yaml"
#: One anonymization, timed inside the process (its imports excluded: they are the same
#: in every row); prints the seconds.
ANONYMIZE = f"""
import time
import numpy as np
from ehr_release import registry
from ehr_release.ingest.readers import read_dataset
data = read_dataset({str(DEMO)!r})
entry = registry.get("artuc")
params = entry.parse({{"k": "5", "m": "2", "delta": "0.3", "config": {str(CONFIG)!r}}})
started = time.perf_counter()
entry.anonymize(data, params, np.random.default_rng(1))
print(time.perf_counter() - started)
"""
WARM_UP = "from ehr_release.registry.warm_up import warm_up; warm_up(lambda line: None)"


def timed(code: str, cache: Path) -> float:
    """Seconds ``code`` reports (or its wall time if it prints nothing) in a fresh process."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    return float(out.splitlines()[-1]) if out else time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warmed", type=Path, default=None,
                    help="a numba cache the warm-up already filled: only the `after` row, "
                         "without compiling twice (minutes on a loaded machine)")
    args = ap.parse_args()
    nan = float("nan")
    with tempfile.TemporaryDirectory(prefix="ehr-numba-") as tmp:
        before, after = Path(tmp) / "before", args.warmed or Path(tmp) / "after"
        first = timed(ANONYMIZE, before) if args.warmed is None else nan
        warm = timed(ANONYMIZE, before) if args.warmed is None else nan
        warm_up = timed(WARM_UP, after)
        first_after = timed(ANONYMIZE, after)
        warm_after = timed(ANONYMIZE, after)
    load = os.getloadavg()[0]
    print(f"ArtUC k=5 m=2 on the MIMIC-III demo, anonymize only, fresh numba cache "
          f"(load average {load:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'':<26}{'first use s':>12}{'warm s':>9}{'first/warm':>12}{'warm-up s':>11}")
    print(f"{'before (no warm-up)':<26}{first:>12.1f}{warm:>9.1f}{first / warm:>12.2f}"
          f"{'—':>11}")
    print(f"{'after (make install)':<26}{first_after:>12.1f}{warm_after:>9.1f}"
          f"{first_after / warm_after:>12.2f}{warm_up:>11.1f}")
    print("goal (issue 37 goal 4): first/warm ≤ 2.00")


if __name__ == "__main__":
    main()
