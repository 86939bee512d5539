"""Benchmark of the history attack audit (issue 31): one release against 100 earlier ones.

The lead's goal: checking a release of a 100K-patient source against 100 earlier releases of
the same patients costs no more than one verification of that release. The source is
:mod:`ehr_release.samples.synthetic` fitted to the MIMIC-III demo (``../shared/data/mimic3-demo``:
age, gender, codes whose prevalence follows age band and gender). Per algorithm:

* the current release C is the source minus one patient; the earlier releases are the
  source itself and the source minus 5, 10 and 50 patients (``--distinct`` of them, each
  anonymized once), repeated under distinct run labels up to ``--earlier``. Labels are all
  the audit keys its cache on, so every earlier release is read as if it were different
  bytes (nothing is shared between labels);
* ``read`` is :func:`~ehr_release.privacy.attacks.history.published_terms` of C (one
  release's bytes → term counts);
* ``cold`` is :func:`~ehr_release.privacy.attacks.history.attack_history` with an empty
  cache: every one of the 101 releases read, then compared;
* ``warm`` is the same call with every release's term counts already cached (what the flow
  pays when it keeps each release's counts from the day it was made);
* ``verify`` is the registry entry's verifier on C (closed world not included), the
  yardstick; ``cold/verify`` and ``warm/verify`` are the goal's ratios.

Measured 2026-11-28 (stop of issue 31, 2 cores shared, load 9–14; default arguments):

===============  ========  ======  ======  ======  ========  ======  ======
algorithm        patients  read s  cold s  warm s  verify s  cold/v  warm/v
===============  ========  ======  ======  ======  ========  ======  ======
disassociation    100,000   0.128   17.60   0.382     24.92    0.71   0.015
artuc-baseline    100,000   0.390   38.55   0.002     74.13    0.52   0.000
===============  ========  ======  ======  ======  ========  ======  ======

Both releases verified and both histories failed (smallest group 1: the patient removed).
Reading every release (cold) stays under one verification; with each release's counts
kept, the comparison itself costs 0.4 s at most.

Usage: ``python bench/history_attack.py [--n 100000] [--earlier 100] [--distinct 4]
[--algorithms disassociation,artuc-baseline] [--k 5]`` (``--quick``: 10,000 patients).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from ehr_release import registry
from ehr_release.ingest import read_dataset
from ehr_release.model.dataset import PATIENT_ID, Dataset
from ehr_release.privacy.attacks.history import (
    HeldRelease,
    Overlap,
    attack_history,
    published_terms,
)
from ehr_release.samples.synthetic import fit, generate

#: ``$EHR_RELEASE_SHARED_DATA``, else ``../shared/data`` beside the checkout, else the
#: workplace's copy (a worktree has no neighbour), as tests/conftest.py looks for it.
DEMO = next((p for p in (Path(os.environ.get("EHR_RELEASE_SHARED_DATA", "/nonexistent")),
                         Path(__file__).resolve().parents[2] / "shared" / "data",
                         Path("/work/shared/data")) if p.is_dir()),
            Path("/work/shared/data")) / "mimic3-demo"
REMOVED = (0, 5, 10, 50)
CONFIG = {
    "attributes": {
        "age": {"type": "numerical", "domain": [0, 120], "weight": 0.5},
        "gender": {"type": "categorical", "hierarchy": {"All": ["F", "M"]}, "weight": 0.5}},
    "codes": {"hierarchy": "icd9"},
    "constraints": [{"name": "one", "codes": "all"}],
}


def _without(ds: Dataset, ids: list[str]) -> Dataset:
    gone = set(ids)
    keep = [p for p in ds.patient_ids if p not in gone]
    diagnoses = ds.diagnoses[ds.diagnoses[PATIENT_ID].isin(keep)].reset_index(drop=True)
    return Dataset(ds.patients.loc[keep], diagnoses, source=ds.source)


def _params(name: str, k: int, config: Path) -> dict[str, str]:
    if name == "disassociation":
        return {"k": str(k), "m": "2"}
    return {"k": str(k), "m": "2", "delta": "0.5", "epsilon": "10%", "config": str(config),
            "compare": "false"}


def _best(fn, repeat: int) -> tuple[float, object]:  # noqa: ANN001 - any callable
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def run(name: str, source: Dataset, args: argparse.Namespace, config: Path) -> dict:
    entry = registry.get(name)
    params = entry.parse(_params(name, args.k, config))
    ids = source.patient_ids
    start = time.perf_counter()
    current_ds = _without(source, ids[:1])
    current = HeldRelease("run-current", name, entry.anonymize(
        current_ds, params, np.random.default_rng(1)), args.k)
    made = [(removed, entry.anonymize(_without(source, ids[:removed]), params,
                                      np.random.default_rng(2 + removed)))
            for removed in REMOVED[:args.distinct]]
    anonymize = time.perf_counter() - start
    n = source.n_patients
    earlier = []
    for i in range(args.earlier):
        removed, files = made[i % len(made)]
        # C lacks patient 0; this earlier release lacks patients 0 … removed−1
        overlap = Overlap(shared=n - max(removed, 1), only_current=max(removed - 1, 0),
                          only_earlier=1 if removed == 0 else 0)
        earlier.append((HeldRelease(f"run-{i:03d}", name, files, args.k), overlap))
    read, _ = _best(lambda: published_terms(current), args.repeat)
    cold, report = _best(lambda: attack_history(current, earlier), args.repeat)
    cache: dict = {}
    attack_history(current, earlier, terms=cache)
    warm, _ = _best(lambda: attack_history(current, earlier, terms=cache), args.repeat)
    verify, verdict = _best(lambda: entry.verify(current.files, current_ds, params), 1)
    size = sum(len(b) for b in current.files.values()) / 1e6
    return {"algorithm": name, "patients": n, "MB": size, "terms": len(cache[current.label]),
            "anonymize": anonymize, "read": read, "cold": cold, "warm": warm,
            "verify": verify, "holds": verdict.holds, "passed": report.passed,
            "smallest": report.smallest_candidate_set}


def _row(r: dict) -> str:
    return (f"{r['algorithm']:<22}{r['patients']:>9,}{r['MB']:>7.1f}{r['terms']:>7,}"
            f"{r['anonymize']:>8.1f}{r['read']:>8.3f}{r['cold']:>8.2f}{r['warm']:>8.3f}"
            f"{r['verify']:>9.2f}{r['cold'] / r['verify']:>8.2f}"
            f"{r['warm'] / r['verify']:>8.3f}  verified {r['holds']}, history "
            f"{'passed' if r['passed'] else 'failed'} (smallest group {r['smallest']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--earlier", type=int, default=100)
    parser.add_argument("--distinct", type=int, default=len(REMOVED))
    parser.add_argument("--algorithms", default="disassociation,artuc-baseline")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.n = 10_000
    if not DEMO.is_dir():
        sys.exit(f"needs the MIMIC-III demo in {DEMO}")
    source = generate(fit(read_dataset(DEMO)), args.n, np.random.default_rng(7))
    print(f"{args.earlier} earlier releases ({args.distinct} distinct anonymizations), "
          f"k = {args.k}, m = 2")
    print(f"{'algorithm':<22}{'patients':>9}{'MB':>7}{'terms':>7}{'anon s':>8}"
          f"{'read s':>8}{'cold s':>8}{'warm s':>8}{'verify s':>9}{'cold/v':>8}"
          f"{'warm/v':>8}  verdicts", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(yaml.safe_dump(CONFIG))
        for name in args.algorithms.split(","):
            print(_row(run(name, source, args, config)), flush=True)  # as each one ends
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
