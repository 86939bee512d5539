"""Disassociation's utility evaluation alone: CPU seconds and a hash of its whole report.

Issue 18 goal 1: evaluation is the governed run's largest stage (k=5, m=2 on 58,302
INFORMS-shaped records). The script builds the release once (``bench/disassociation.py``'s
generator, the registry's ``anonymize`` with the run's defaults), then runs the registry's
``evaluate`` on its bytes with a fixed seed and prints the process CPU and wall seconds and a
SHA-256 of everything that reaches the certificate (metrics, tables, notes, chart PNG bytes),
so two source trees can be compared for speed and for identical output.

``--peer-codes FILE`` (the public C++ program's ``data/diagnosis_codes_final.csv``) evaluates
instead on the inputs issue 37 goal 1 measures: the program's 58,302 records and its 374
constraints as the policy (:mod:`peer_inputs`), the evaluation the governed run's second
process does there.

``--ahead`` first runs the entry's ``prepare_evaluation`` (what the flow's second process
derives while the flow anonymizes: the comparator and the release-independent original
side), untimed, from a stream seeded as the evaluation's, so the hash shows
that the prepared evaluation's report is the in-place one and the time is what is left.

``--stages`` also prints the CPU seconds of the evaluation's parts (each named function
wrapped in a timer; a part's time includes the parts it calls), without cProfile's per-call
overhead, which inflates Python-heavy parts two- to threefold.

    PYTHONPATH=src .venv/bin/python bench/dis_evaluate.py [--records 58302] [--seed 0]
        [--profile 25] [--stages] [--ahead]
        [--peer-codes .../diagnosis_codes_final.csv]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def report_hash(report) -> str:
    """SHA-256 of the report's dict (floats by repr, so nan and -0.0 count) and chart bytes."""
    digest = hashlib.sha256(json.dumps(report.to_dict(), sort_keys=True, default=repr,
                                       allow_nan=True).encode())
    for chart in report.charts:
        digest.update(chart.png if hasattr(chart, "png") else repr(chart).encode())
    return digest.hexdigest()


#: The evaluation's parts timed by ``--stages``, under the module where they are looked up
#: when called (``risk_table`` is imported by name into the evaluation's module).
STAGES = {
    "ehr_release.algorithms.disassociation": ["DisassociatedRelease.from_bytes"],
    "ehr_release.utility.disassociation": [
        "w1_workload", "w2_workload", "BitsetCounter", "reconstruction_answers",
        "ReleaseEstimator", "risk_table", "mre_histogram"],
    "ehr_release.utility.reidentification": ["code_sets_to_test", "CandidateCounter.count",
                                             "_and_count"],
}


def _timed(spent: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.process_time() - start
    return call


def time_stages(spent: dict[str, float]) -> None:
    """Wrap every part of :data:`STAGES`, and the CBA comparator, so that ``spent`` sums
    each one's CPU seconds (a part's time includes the parts it calls)."""
    import importlib

    for module_name, names in STAGES.items():
        owner: Any = importlib.import_module(module_name)
        for name in names:
            *path, attr = name.split(".")
            where = owner
            for part in path:
                where = getattr(where, part)
            raw = where.__dict__[attr] if path else getattr(where, attr)
            if isinstance(raw, classmethod):
                setattr(where, attr, classmethod(_timed(spent, name, raw.__func__)))
            else:
                setattr(where, attr, _timed(spent, name, raw))
    dis = importlib.import_module("ehr_release.utility.disassociation")
    label, method = dis.COMPARATORS["cba"]
    dis.COMPARATORS["cba"] = (label, _timed(spent, "cba (comparator)", method))


def peer_dataset(codes_file: Path, folder: Path) -> tuple[Any, Path]:
    """The peer's records as a governed run reads them, and its constraints as a policy."""
    from peer_inputs import write_peer_inputs

    from ehr_release.ingest.readers import read_dataset

    peer = write_peer_inputs(codes_file, folder)
    return read_dataset(peer["extract"]), peer["policy"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=58302)
    ap.add_argument("--seed", type=int, default=0, help="data, anonymization and evaluation")
    ap.add_argument("--profile", type=int, default=0, help="print the N top cumulative rows")
    ap.add_argument("--stages", action="store_true", help="CPU seconds of the parts")
    ap.add_argument("--ahead", action="store_true",
                    help="run prepare_evaluation first (untimed), as the second process does")
    ap.add_argument("--peer-codes", type=Path, default=None,
                    help="the C++ program's code list: evaluate on its records and constraints")
    args = ap.parse_args(argv)
    from ehr_release.registry.disassociation import ENTRY

    if args.peer_codes is not None:
        # one folder for every run: the policy's name (its path) is in the report's notes
        folder = Path(tempfile.gettempdir()) / "dis_evaluate_peer"
        folder.mkdir(exist_ok=True)
        data, policy = peer_dataset(args.peer_codes, folder)
        params = {"k": 5, "m": 2, "policy": str(policy)}
        args.records = len(data.patients)
    else:
        from disassociation import informs_like

        params = {"k": 5, "m": 2, "policy": "hierarchy:3digit"}
        data = informs_like(args.records, seed=args.seed)
    files = ENTRY.anonymize(data, params, np.random.default_rng(args.seed))
    evaluate = ENTRY.evaluate
    spent: dict[str, float] = {}
    if args.stages:
        time_stages(spent)
    rng = np.random.default_rng(1000 + args.seed)
    if args.ahead:
        params = ENTRY.parse(params)
        ENTRY.prepare_evaluation(data, params, np.random.default_rng(1000 + args.seed))
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
    for name, secs in sorted(spent.items(), key=lambda x: -x[1]):
        print(f"  {name:<36}{secs:7.2f} s CPU")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
