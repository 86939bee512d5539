"""Disassociation's utility evaluation alone: CPU seconds and a hash of its whole report.

Issue 18 goal 1: evaluation is the governed run's largest stage (k=5, m=2 on 58,302
INFORMS-shaped records). The script builds the release once (``bench/disassociation.py``'s
generator, the registry's ``anonymize`` with the run's defaults), then runs the registry's
``evaluate`` on its bytes with a fixed seed and prints the process CPU and wall seconds and a
SHA-256 of everything that reaches the certificate (metrics, tables, notes, chart PNG bytes),
so two source trees can be compared for speed and for identical output.

    PYTHONPATH=src .venv/bin/python bench/dis_evaluate.py [--records 58302] [--seed 0]
        [--profile 25]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def report_hash(report) -> str:
    """SHA-256 of the report's dict (floats by repr, so nan and -0.0 count) and chart bytes."""
    digest = hashlib.sha256(json.dumps(report.to_dict(), sort_keys=True, default=repr,
                                       allow_nan=True).encode())
    for chart in report.charts:
        digest.update(chart.png if hasattr(chart, "png") else repr(chart).encode())
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=58302)
    ap.add_argument("--seed", type=int, default=0, help="data, anonymization and evaluation")
    ap.add_argument("--profile", type=int, default=0, help="print the N top cumulative rows")
    args = ap.parse_args(argv)
    from disassociation import informs_like

    from ehr_release.registry.disassociation import ENTRY

    params = {"k": 5, "m": 2, "policy": "hierarchy:3digit"}
    data = informs_like(args.records, seed=args.seed)
    files = ENTRY.anonymize(data, params, np.random.default_rng(args.seed))
    evaluate = ENTRY.evaluate
    rng = np.random.default_rng(1000 + args.seed)
    profiler = cProfile.Profile() if args.profile else None
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if profiler:
        profiler.enable()
    report = evaluate(files, data, params, rng)
    if profiler:
        profiler.disable()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(f"records {args.records:,}  seed {args.seed}  evaluate CPU {cpu:.2f} s  "
          f"wall {wall:.2f} s  report sha256 {report_hash(report)[:16]}")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
