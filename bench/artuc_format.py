"""ArtUC release format benchmark (issue 18 goal 3): size, pandas load, verification.

Reads a release saved by ``bench/artuc.py --save DIR`` (``records.parquet``,
``generalized_codes.parquet`` and ``case.json``), regenerates the same data, and prints one row:

* ``JSON Lines MB``: the same records written as the JSON Lines file published before issue 18
  (every generalized code's member list on every record), computed from the Parquet tables —
  the comparison, from the same release;
* ``Parquet MB``: both tables; ``load s``: ``pandas.read_parquet`` of both (the documented
  one call per file);
* ``verify s`` and ``verify peak MB``: the (k, k^m) verifier on the Parquet bytes, in its own
  process (peak RSS includes generating the original data: ``data MB`` is the RSS before
  verification starts); ``--attack`` adds the attack audit's time and peak.

Target: ArtUC's 208,387-record release ≤ 100 MB.

    .venv/bin/python bench/artuc.py --cases ehrd --save /tmp/rel208   # once, ~10+ min
    .venv/bin/python bench/artuc_format.py /tmp/rel208 [--attack]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

RECORDS, CODES, IDS = "records.parquet", "generalized_codes.parquet", "generalized_codes"


def _mb(n: float) -> float:
    return round(n / 1e6, 1)


def _rss_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def jsonl_bytes(folder: Path) -> int:
    """Size of the pre-issue-18 JSON Lines file holding the same records, without building
    it: each line's length from its parts (the same text ``json.dumps`` gives)."""
    codes = pq.read_table(folder / CODES).column("codes").to_pylist()
    shown = [len(json.dumps(g)) for g in codes]
    records = pq.read_table(folder / RECORDS)
    names = [c for c in records.column_names if c not in ("cluster", IDS)]
    columns = [records.column(n).to_pylist() for n in names]
    total = 0
    for row, (label, ids) in enumerate(zip(records.column("cluster").to_pylist(),
                                           records.column(IDS).to_pylist(), strict=True)):
        demo = {n: ([int(x) if float(x).is_integer() else x for x in col[row]]
                    if isinstance(col[row], list) else col[row])
                for n, col in zip(names, columns, strict=True)}
        head = json.dumps({"cluster": label, "demographics": demo})[:-1]
        body = 2 + sum(shown[i] for i in ids) + 2 * max(len(ids) - 1, 0)  # "[" ", " "]"
        total += len(head) + len(', "codes": ') + body + 1 + 1  # "}" and "\n"
    return total


def _verify(folder: Path, attack: bool) -> dict:
    """In this (child) process: regenerate the data, verify, report time and peak RSS."""
    sys.path.insert(0, str(Path(__file__).parent))
    from artuc import CASES, EPS_SHARE, K, M

    from ehr_release.configuration.constraints import parse_config, read_hierarchy_file
    from ehr_release.privacy.kkm import check_kkm

    case = json.loads((folder / "case.json").read_text())
    dataset, raw = CASES[case["case"]][0](case["records"])
    config = parse_config(raw, lambda ref: read_hierarchy_file(ref, Path()))
    files = {name: (folder / name).read_bytes() for name in (RECORDS, CODES)}
    row: dict = {"data MB": _rss_mb()}
    start = time.perf_counter()
    report = check_kkm(files, dataset, config, algorithm="artuc", k=K, m=M,
                        delta=case["delta"], epsilon=EPS_SHARE * len(dataset.distinct_codes()),
                        constrained=True)
    row["verify s"] = round(time.perf_counter() - start, 1)
    row["verified"] = "yes" if report.holds else "no: " + ", ".join(
        r.name for r in report.failures)
    row["verify peak MB"] = _rss_mb()
    if attack:
        from ehr_release.privacy.attacks.kkm import attack_kkm

        start = time.perf_counter()
        audit = attack_kkm(files, dataset, config, k=K, m=M)
        row["attack s"] = round(time.perf_counter() - start, 1)
        row["attack"] = "passed" if audit.passed else "FAILED"
        row["attack peak MB"] = _rss_mb()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--attack", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_verify(args.folder, args.attack)))
        return
    case = json.loads((args.folder / "case.json").read_text())
    files = [args.folder / RECORDS, args.folder / CODES]
    start = time.perf_counter()
    frames = [pd.read_parquet(f) for f in files]
    load = time.perf_counter() - start
    row = {"case": case["case"], "records": len(frames[0]),
           "generalized codes": len(frames[1]),
           "JSON Lines MB": _mb(jsonl_bytes(args.folder)),
           "Parquet MB": _mb(sum(f.stat().st_size for f in files)),
           "records.parquet MB": _mb(files[0].stat().st_size),
           "load s": round(load, 2)}
    del frames
    cmd = [sys.executable, __file__, str(args.folder), "--child"] + (
        ["--attack"] if args.attack else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    row.update(json.loads(out.stdout.strip().splitlines()[-1]))
    print(" | ".join(row))
    print(" | ".join(str(v) for v in row.values()))


if __name__ == "__main__":
    main()
