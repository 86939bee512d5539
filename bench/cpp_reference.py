"""The paper's public C++ disassociation program as a yardstick (issue 37 goal 1).

The program (HorPart + VerPart, JSON output) is public C++ that this project does not ship:
build it outside the repository and pass its binary with ``--cpp``. Measured in issue 37's
sixth round: the newest stored sources of ``ikotsov/Disassociation-Algorithm`` that build
together (``horpart/horpart.cpp`` c485153, ``verpart/verpart.cpp`` 82d2e07, ``main.cpp``
0827371; older ``horpart.cpp`` versions recurse without end on groups of identical records),
``g++ -O2 -std=c++17`` with Debian's nlohmann-json, its ``main`` changed only to take the
three files below from its arguments and k = 5 (it reads fixed paths with k = 3).

It reads one record per line (codes separated by commas, no header, no quotes: a quoted line
would give codes with a quote in them) and a JSON object of utility constraints (name →
codes); this module writes both for a generated data set — the constraints are the governed
run's own default policy (``hierarchy:3digit``), so both sides group the same codes — and
times the program's wall and CPU (``/usr/bin/time``-like, from ``os.wait4``) and peak memory.
Issue 37 measured the program on its repository's own inputs instead (58,302 records, 374
constraints): ``bench/governed_run.py --peer-codes`` regenerates them
(:mod:`peer_inputs`). There it takes 13.3–14.6 s and 2.9 GB on this project's bench machine,
against 5.3–5.5 s and 371 MB on the generated records.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from ehr_release.configuration.policies import hierarchy_policy
from ehr_release.model.dataset import Dataset


def write_inputs(dataset: Dataset, folder: Path) -> tuple[Path, Path]:
    """The records as the program's CSV and the 3-digit constraints as its JSON."""
    records = folder / "cpp-records.csv"
    with records.open("w", encoding="utf-8") as out:
        for codes in dataset.code_sets():
            out.write(",".join(sorted(codes)) + "\n")
    policy = hierarchy_policy(dataset.distinct_codes(), "3digit")
    constraints = folder / "cpp-constraints.json"
    constraints.write_text(json.dumps(
        {f"U{i}": sorted(str(c) for c in group) for i, group in
         enumerate(policy.constraints, start=1)}), encoding="utf-8")
    return records, constraints


def run_cpp(binary: Path, records: Path, constraints: Path, out: Path) -> dict[str, float]:
    """One run of the program: wall seconds, CPU seconds (user + system), peak RSS in MB."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(binary), str(records), str(constraints), str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"C++ program failed ({proc.returncode})")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024}
