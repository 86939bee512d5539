"""DiffGen benchmark: Adult runtime, scalability to 1M records, the paper's accuracy grid.

    python bench/diffgen.py                    # everything (the grid takes ~10-20 minutes)
    python bench/diffgen.py time scale         # only the runtime parts
    python bench/diffgen.py audit              # verification vs attack-audit time
    python bench/diffgen.py grid --runs 3 --eps 1 --h 10   # a slice of the grid
    python bench/diffgen.py paper --runs 10    # the paper's protocol: C4.5, 10 × 10-fold CV
    python bench/diffgen.py paper --runs 10 --cv-runs 5   # fewer CV runs (~1 min CPU each)

* ``time``  -- Adult (45,222 records), ε = 1, h = 15, the registry's ``anonymize`` end to end
  (encode, Algorithm 1 with OpenDP noise, serialize); median of 5. Target ≤ 3 s.
* ``scale`` -- Adult blown up as in the paper (every record plus α−1 variants, each with two
  attribute values replaced by those of random other records) to 200K / 500K / 1M records,
  h = 15, ε = 1; each size in its own process so peak memory (max RSS) is its own. Target
  ≤ 60 s at 1M.
* ``audit`` -- Adult, ε = 1, h = 15: verification (closed world, ledger replay, the counts
  check of issue 14) and the attack audit of the same release, median of 3 each.
* ``grid``  -- CA of the paper's protocol (2/3 train, 1/3 test, C4.5-style tree) for
  ε ∈ {0.1, 0.25, 0.5, 1} × h ∈ {4, 6, ..., 16}, Max and InfoGain, averaged over ``--runs``
  random splits (the same splits for every cell), with BA and LA.
* ``paper`` -- Adult, ε = 1, h = 10, Max, three rows: today's protocol (CART, ``--runs``
  random 2/3–1/3 splits), C4.5 on the same kind of splits, and the paper's protocol (C4.5,
  ``--cv-runs`` runs of stratified 10-fold CV, 10 DiffGen runs each); CA as mean ± std over
  runs, BA, LA, CART's CA on the same releases, and wall time. Paper: CA ≈ 82.2 %.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult"
sys.path.insert(0, str(ROOT / "src"))

from ehr_release import registry  # noqa: E402
from ehr_release.algorithms.diffgen import (  # noqa: E402
    DiffGenParams,
    encode_dataset,
    noise_source,
    run_diffgen,
)
from ehr_release.algorithms.diffgen.generalize import generalize  # noqa: E402
from ehr_release.algorithms.diffgen.release import cut_document  # noqa: E402
from ehr_release.configuration.taxonomies import load_config  # noqa: E402
from ehr_release.configuration.taxonomies.adult import read_adult  # noqa: E402
from ehr_release.model.dataset import Dataset  # noqa: E402
from ehr_release.release.verification import attack_release, verify_release  # noqa: E402
from ehr_release.utility import diffgen as utility  # noqa: E402

EPSILONS = (Fraction(1, 10), Fraction(1, 4), Fraction(1, 2), Fraction(1))
HS = (4, 6, 8, 10, 12, 14, 16)


def _table(rows: list[dict], columns: list[str]) -> str:
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = [" | ".join(c.ljust(width[c]) for c in columns),
             "-|-".join("-" * width[c] for c in columns)]
    lines += [" | ".join(str(r[c]).ljust(width[c]) for c in columns) for r in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- runtime
def bench_time(repeats: int = 5) -> None:
    entry = registry.get("diffgen")
    data = read_adult(ADULT)
    params = entry.parse({"epsilon": "1", "h": "15", "taxonomies": "adult"})
    times, groups = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        files = entry.anonymize(data, params, np.random.default_rng())
        times.append(time.perf_counter() - start)
        groups.append(files["groups.csv"].count(b"\n") - 1)
    print("\n## Adult, ε = 1, h = 15 (registry anonymize, OpenDP noise)\n")
    print(_table([{"records": f"{data.n_patients:,}", "runs": repeats,
                   "median s": f"{statistics.median(times):.2f}",
                   "max s": f"{max(times):.2f}",
                   "groups (median)": f"{int(statistics.median(groups)):,}",
                   "target": "≤ 3 s"}],
                 ["records", "runs", "median s", "max s", "groups (median)", "target"]))


def bench_audit(repeats: int = 3) -> None:
    """Verification (with the counts check) next to the attack audit, on one release."""
    from ehr_release.registry.diffgen import ENTRY as entry

    data = read_adult(ADULT)
    params = entry.parse({"epsilon": "1", "h": "15", "taxonomies": "adult"})
    files = entry.anonymize(data, params, np.random.default_rng())
    verify_s, attack_s = [], []
    NL = b"\n"  # noqa: N806 - no backslash inside an f-string on Python 3.11
    for _ in range(repeats):
        start = time.perf_counter()
        report = verify_release(entry, files, data, params, None)
        verify_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        attack = attack_release(entry, files, data, params, None)
        attack_s.append(time.perf_counter() - start)
    print("\n## Adult, ε = 1, h = 15: verification vs attack audit (median of "
          f"{repeats})\n")
    print(_table([{"records": f"{data.n_patients:,}",
                   "groups": f"{files['groups.csv'].count(NL) - 1:,}",
                   "verify s": f"{statistics.median(verify_s):.2f}",
                   "attack s": f"{statistics.median(attack_s):.2f}",
                   "holds": report.holds, "attack passed": attack.passed}],
                 ["records", "groups", "verify s", "attack s", "holds", "attack passed"]))
    print(f"\nattack: {attack.measured}")
    counts = next(r for r in report.requirements if r.name == "counts noisy")
    print(f"counts check: {counts.measured}")


def blow_up(data: Dataset, alpha: int, rng: np.random.Generator,
            replaced: int = 2) -> Dataset:
    """Each record plus ``alpha − 1`` variants with ``replaced`` attribute values taken from
    random other records (the paper's scalability data)."""
    base = data.patients.reset_index(drop=True)
    columns = [c for c in base.columns if c != data.class_column]
    copies = [base]
    for _ in range(alpha - 1):
        variant = base.copy()
        which = rng.integers(0, len(columns), size=(len(base), replaced))
        donors = rng.integers(0, len(base), size=(len(base), replaced))
        for j, col in enumerate(columns):
            for r in range(replaced):
                hit = np.flatnonzero(which[:, r] == j)
                variant.loc[hit, col] = base[col].to_numpy()[donors[hit, r]]
        copies.append(variant)
    patients = pd.concat(copies, ignore_index=True)
    for col in columns:
        if patients[col].dtype == object:
            patients[col] = patients[col].astype("category")
    patients.index = pd.Index([f"B{i:07d}" for i in range(len(patients))], name="patient_id")
    return Dataset(patients, data.diagnoses.iloc[0:0], class_column=data.class_column,
                   source=f"Adult ×{alpha}")


def scale_one(n: int) -> dict:
    """One scalability point, run in this process (see ``bench_scale``)."""
    data = read_adult(ADULT)
    alpha = -(-n // data.n_patients)
    big = blow_up(data, alpha, np.random.default_rng(0))
    big = Dataset(big.patients.iloc[:n], big.diagnoses, class_column=big.class_column)
    entry = registry.get("diffgen")
    params = entry.parse({"epsilon": "1", "h": "15", "taxonomies": "adult"})
    config = load_config("adult")
    start = time.perf_counter()
    encode_dataset(big, config)
    t_encode = time.perf_counter() - start
    start = time.perf_counter()
    files = entry.anonymize(big, params, np.random.default_rng())
    total = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    groups = files["groups.csv"].count(b"\n") - 1
    return {"records": f"{n:,}", "anonymize s": f"{total:.1f}",
            "of which encode s": f"{t_encode:.1f}", "groups": f"{groups:,}",
            "peak RSS MB": f"{peak_mb:.0f}"}


def bench_scale(sizes: tuple[int, ...]) -> None:
    rows = []
    for n in sizes:
        done = subprocess.run([sys.executable, __file__, "_scale_one", str(n)],
                              capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("\n## Scalability: Adult blown up, ε = 1, h = 15 (one process per size)\n")
    print(_table(rows, ["records", "anonymize s", "of which encode s", "groups",
                        "peak RSS MB"]))
    print("\nTarget: ≤ 60 s at 1,000,000 records.")


# --------------------------------------------------------------------------- accuracy
def bench_grid(runs: int, epsilons: tuple[Fraction, ...], hs: tuple[int, ...],
               scores: tuple[str, ...]) -> None:
    data = read_adult(ADULT)
    config = load_config("adult")
    enc = encode_dataset(data, config)
    rng = np.random.default_rng(2013)
    splits = []
    for _ in range(runs):
        order = rng.permutation(enc.n)
        cut = int(round(enc.n * utility.TRAIN_FRACTION))
        splits.append((enc.subset(np.sort(order[:cut])), enc.subset(np.sort(order[cut:]))))
    base = [utility.raw_accuracy(tr, te, rng) for tr, te in splits]
    ba = 100 * np.mean([b for b, _ in base])
    la = 100 * np.mean([la for _, la in base])
    cells: dict[tuple[str, Fraction, int], list[float]] = {}
    started = time.perf_counter()
    for score in scores:
        for eps in epsilons:
            for h in hs:
                params = DiffGenParams(eps, h, score)
                accs = []
                for train, test in splits:
                    result = run_diffgen(train, params, noise_source(None))
                    cut_doc = cut_document(result, config, params)
                    accs.append(100 * utility.release_accuracy(
                        result.groups, generalize(test, cut_doc), cut_doc, rng))
                cells[(score, eps, h)] = accs
    print(f"\n## Accuracy grid on Adult: CA (%) mean ± std of {runs} runs "
          f"(2/3 train, 1/3 test); BA = {ba:.2f}%, LA = {la:.2f}% "
          f"[{time.perf_counter() - started:.0f} s]\n")
    for score in scores:
        rows = []
        for h in hs:
            row = {"h": h}
            for eps in epsilons:
                accs = cells[(score, eps, h)]
                row[f"ε={float(eps):g}"] = f"{np.mean(accs):.2f} ± {np.std(accs):.2f}"
            rows.append(row)
        print(f"\n{'Max' if score == 'max' else 'InfoGain'}\n")
        print(_table(rows, ["h", *[f"ε={float(e):g}" for e in epsilons]]))


def bench_paper(runs: int, cv_runs: int) -> None:
    """Today's protocol next to the paper's (issue 19), on the same data and budget."""
    data = read_adult(ADULT)
    config = load_config("adult")
    enc = encode_dataset(data, config)
    params = DiffGenParams(Fraction(1), 10, "max")
    rows = []
    for protocol, classifier in (("splits", "cart"), ("splits", "c45"), ("10x10cv", "c45")):
        rng = np.random.default_rng(2013)
        run = utility.cv_protocol if protocol == "10x10cv" else utility.paper_protocol
        n_runs = cv_runs if protocol == "10x10cv" else runs
        start = time.perf_counter()
        stats = run(enc, config, params, n_runs, rng, classifier=classifier,
                    compare=classifier != "cart")
        seconds = time.perf_counter() - start
        ca = 100 * stats["CA"]
        other = (f"{100 * stats['CA other'].mean():.2f} ± {100 * stats['CA other'].std():.2f}"
                 if "CA other" in stats else "(this row)")
        rows.append({"protocol": utility.protocol_text(protocol, n_runs), "classifier":
                     utility.CLASSIFIER_NAMES[classifier],
                     "CA % (mean ± std over runs)": f"{ca.mean():.2f} ± {ca.std():.2f}",
                     "BA %": f"{100 * stats['BA'].mean():.2f}",
                     "LA %": f"{100 * stats['LA'].mean():.2f}",
                     "CART CA, same releases": other,
                     "DiffGen runs": n_runs * (utility.CV_FOLDS if protocol == "10x10cv"
                                               else 1),
                     "wall s": f"{seconds:.0f}"})
    print("\n## Adult, ε = 1, h = 10, Max: today's protocol vs the paper's\n")
    print(_table(rows, list(rows[0])))
    print("\nPaper (Mohammed et al. 2013): C4.5, 10 × 10-fold CV, CA ≈ 82.2 %, BA 85.3 %, "
          "LA 75.5 %.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", default=["time", "audit", "scale", "grid"])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cv-runs", type=int, default=None,
                        help="runs of 10-fold CV in 'paper' (default: --runs)")
    parser.add_argument("--eps", type=str, nargs="*", default=None)
    parser.add_argument("--h", type=int, nargs="*", default=None)
    parser.add_argument("--score", nargs="*", default=["max", "infogain"])
    parser.add_argument("--sizes", type=int, nargs="*",
                        default=[200_000, 500_000, 1_000_000])
    args = parser.parse_args()
    if args.parts[:1] == ["_scale_one"]:
        print(json.dumps(scale_one(int(args.parts[1]))))
        return
    if not (ADULT / "adult.data").exists():
        print(f"Adult data not found at {ADULT}; nothing to benchmark")
        return
    if "time" in args.parts:
        bench_time()
    if "audit" in args.parts:
        bench_audit()
    if "scale" in args.parts:
        bench_scale(tuple(args.sizes))
    if "paper" in args.parts:
        bench_paper(args.runs, args.cv_runs or args.runs)
    if "grid" in args.parts:
        eps = tuple(Fraction(e) for e in args.eps) if args.eps else EPSILONS
        bench_grid(args.runs, eps, tuple(args.h) if args.h else HS, tuple(args.score))


if __name__ == "__main__":
    main()
