"""Benchmark of Disassociation on INFORMS-like data (issue 3).

INFORMS 2008 (the paper's data) is not public here, so records are generated with its
published shape: 631 distinct diagnosis codes, about 4.3 codes per record (at most 17), a
Zipf-like code frequency. For each size the script times anonymization (HorPart, VerPart,
Refine, serialization), the independent verification of the release (the closed-world
schema check and the model verifier, shown apart), the attack audit (issue 14: goal ≤ the
verification), and — as the yardstick of issue 3 — one plain pass counting every itemset of
≤ m codes of the original, in pure Python and vectorized. It prints one table and the peak
memory (RSS) of the process. Issue 18: ``verify/floor`` is (schema check + model verifier) over
the vectorized pass (goal ≤ 3 at 1M), each the fastest of ``--repeat`` runs taken in turn
(the floor alone moved 0.6–1.0 s between runs of one process), and the release's size on
disk is shown as Parquet (published) next to the JSON document it replaced (``json MB``,
written here for the comparison only).

Usage: ``python bench/disassociation.py [--sizes 25000,1000000] [--k 5] [--m 2]
[--code-system icd10]`` (``icd10``: the same records, codes mapped to ICD-10-CM by the CMS GEMs
and the 3-digit policy taken in ICD-10-CM; ``bench/code_system.py``)
(``--quick`` runs 2,500 and 25,000 only; ``--no-plain`` skips the plain passes;
``--unshuffled`` also attacks a release published without shuffling, to show what the
audit's positional test finds at that size).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections import Counter
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.algorithms.disassociation import (
    RELEASE_FILE,
    disassociate_dataset,
    encode_dataset,
)
from ehr_release.algorithms.disassociation.encoding import distinct
from ehr_release.configuration.policies import hierarchy_policy
from ehr_release.model.dataset import AGE, CODE, PATIENT_ID, Dataset
from ehr_release.model.hierarchy import code_hierarchy, icd9_hierarchy
from ehr_release.privacy.attacks.disassociation import attack
from ehr_release.privacy.closed_world import violations
from ehr_release.privacy.disassociation import check_km
from ehr_release.privacy.disassociation.replay import Choices
from ehr_release.privacy.formats.disassociation import SCHEMA

N_CODES = 631
MEAN_CODES = 4.3
MAX_CODES = 17
ZIPF_S, ZIPF_Q = 1.0, 2.0


def informs_like(n: int, seed: int = 0) -> Dataset:
    """``n`` records over 631 ICD-9 codes, ≈4.3 distinct codes each, Zipf frequencies."""
    rng = np.random.default_rng(seed)
    h = icd9_hierarchy()
    leaves = sorted(c for c in h.parent if h.is_leaf(c))
    vocab = np.array(sorted(np.random.default_rng(631).choice(leaves, N_CODES, replace=False)),
                     dtype=object)
    rank = np.random.default_rng(632).permutation(N_CODES)
    weights = (rank + ZIPF_Q) ** -ZIPF_S
    cdf = np.cumsum(weights) / weights.sum()
    # draw a few extra codes per record: duplicates collapse to the target mean of 4.3
    wanted = np.minimum(1 + rng.poisson(MEAN_CODES - 0.8, n), MAX_CODES)
    rec = np.repeat(np.arange(n, dtype=np.int64), wanted)
    code = np.minimum(np.searchsorted(cdf, rng.random(len(rec))), N_CODES - 1)
    key = distinct(rec * N_CODES + code)
    rec, code = key // N_CODES, key % N_CODES
    ids = np.char.add("I", np.char.zfill(np.arange(1, n + 1).astype(str), 7)).astype(object)
    patients = pd.DataFrame(index=pd.Index(ids, name=PATIENT_ID))
    diagnoses = pd.DataFrame({PATIENT_ID: ids[rec], CODE: vocab[code],
                              AGE: pd.array(np.full(len(rec), pd.NA), dtype="Int64")})
    return Dataset(patients, diagnoses, source=f"INFORMS-like (n={n}, seed={seed})")


def plain_pass_python(dataset: Dataset, m: int) -> int:
    """Count every itemset of ≤ m codes of every record with a Counter (the plain way)."""
    counts: Counter[tuple[str, ...]] = Counter()
    for codes in dataset.code_sets():
        ordered = sorted(codes)
        for size in range(1, min(m, len(ordered)) + 1):
            counts.update(combinations(ordered, size))
    return len(counts)


def plain_pass_numpy(dataset: Dataset) -> int:
    """The same count for m = 2, vectorized (encode, pair keys, one sort)."""
    enc = encode_dataset(dataset)
    lengths = np.diff(enc.indptr)
    row = np.repeat(np.arange(len(lengths)), lengths)
    partners = lengths[row] - 1 - (np.arange(len(enc.indices)) - enc.indptr[:-1][row])
    first = np.repeat(np.arange(len(enc.indices)), partners)
    starts = np.cumsum(partners) - partners
    second = first + 1 + np.arange(len(first)) - np.repeat(starts, partners)
    c = enc.n_codes
    pairs = distinct(enc.indices[first] * c + enc.indices[second])
    return len(pairs) + len(distinct(enc.indices))


def json_bytes(release) -> bytes:
    """The release as the JSON document published until issue 18 (for the size only)."""
    doc = {"algorithm": "disassociation", "k": release.k, "m": release.m,
           "clusters": [{"id": c.id, "size": c.size, "record_chunks": c.record_chunks,
                         "item_chunk": c.item_chunk} for c in release.clusters],
           "joint_clusters": [{"clusters": j.clusters, "shared_chunks": j.shared_chunks}
                              for j in release.joint_clusters]}
    return (json.dumps(doc, ensure_ascii=False) + "\n").encode()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, *args):
    """``fn(*args)``, its wall seconds and its CPU seconds (``time.process_time``)."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - start, time.process_time() - cpu


class Unshuffled:
    """An rng whose keys are all equal: every chunk stays in record order (a broken release)."""

    def random(self, n: int) -> np.ndarray:
        return np.zeros(n)


def run(n: int, k: int, m: int, plain: bool = True, unshuffled: bool = False,
        repeat: int = 3, system: str = "icd9") -> dict[str, object]:
    ds = informs_like(n)
    if system == "icd10":  # the same records, codes mapped by the GEMs (bench/code_system.py)
        from code_system import mapped

        ds = mapped(ds)
    codes_per_record = len(ds.diagnoses) / n
    policy = hierarchy_policy(ds.distinct_codes(), "3digit", code_hierarchy(ds.code_system))
    result, t_anon, _ = timed(disassociate_dataset, ds, k, m, policy, np.random.default_rng(1))
    data, t_ser, _ = timed(result.release.to_bytes)
    files = {RELEASE_FILE: data}
    audit, t_att, _ = timed(attack, files, ds, {"k": k, "m": m})
    t_py = float("nan")
    if plain:
        _, t_py, _ = timed(plain_pass_python, ds, m)
    closed, verify, floor, replay = [], [], [], []  # (wall, cpu) of each repeat, in turn
    choices = Choices(policy.constraint_of())
    for _ in range(repeat):
        found, *seconds = timed(lambda: list(violations(files, SCHEMA)))
        closed.append(seconds)
        report, *seconds = timed(check_km, files, ds, k, m)
        verify.append(seconds)
        site, *seconds = timed(lambda: check_km(files, ds, k, m, choices=choices))
        replay.append(seconds)
        if plain and m == 2:
            _, *seconds = timed(plain_pass_numpy, ds)
            floor.append(seconds)
    (t_closed, c_closed), (t_ver, c_ver) = np.min(closed, axis=0), np.min(verify, axis=0)
    t_site = float(np.min(replay, axis=0)[0])
    t_np, c_np = np.min(floor, axis=0) if floor else (float("nan"), float("nan"))
    ratios = [(a[0] + b[0]) / c[0] for a, b, c in zip(closed, verify, floor, strict=False)]
    row: dict[str, object] = {
        "records": n, "codes/rec": f"{codes_per_record:.2f}",
        "distinct": ds.diagnoses[CODE].nunique(), "clusters": len(result.clusters),
        "joint": len(result.release.joint_clusters),
        "anonymize s": f"{t_anon + t_ser:.2f}", "closed s": f"{t_closed:.2f}",
        "verify s": f"{t_ver:.2f}", "site verify s": f"{t_site:.2f}",
        "replay s": f"{t_site - t_ver:.2f}", "replay/verify": f"{(t_site - t_ver) / t_ver:.2f}",
        "replay/anonymize": f"{(t_site - t_ver) / (t_anon + t_ser):.2f}",
        "verify/floor": f"{(t_closed + t_ver) / t_np:.2f}",
        "verify/floor cpu": f"{(c_closed + c_ver) / c_np:.2f}",
        "each repeat": "/".join(f"{r:.2f}" for r in sorted(ratios)) or "nan",
        "attack s": f"{t_att:.2f}", "attack/floor": f"{t_att / t_np:.2f}",
        "attack/verify": f"{t_att / (t_closed + t_ver):.2f}",
        "smallest": audit.smallest_candidate_set,
        "plain py s": f"{t_py:.2f}", "plain np s": f"{t_np:.2f}",
        "verified": report.holds and site.holds and not found and audit.passed,
        "json MB": f"{len(json_bytes(result.release)) / 1e6:.1f}",
        "parquet MB": f"{len(data) / 1e6:.1f}", "peak RSS MB": f"{peak_rss_mb():.0f}"}
    if unshuffled:
        broken = disassociate_dataset(ds, k, m, policy, Unshuffled()).release.to_bytes()
        caught, t_broken, _ = timed(attack, {RELEASE_FILE: broken}, ds, {"k": k, "m": m})
        row["unshuffled attack s"] = f"{t_broken:.2f}"
        row["unshuffled smallest"] = caught.smallest_candidate_set
        print(f"[{n:,} records, unshuffled] {caught.measured}", file=sys.stderr)
    print(f"[{n:,} records] {audit.measured}", file=sys.stderr)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2500,25000,250000,1000000")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--m", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="2,500 and 25,000 records only")
    ap.add_argument("--repeat", type=int, default=3,
                    help="times the schema check, the verifier and the floor are each run "
                         "(in turn); the table shows each one's fastest")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain itemset passes")
    ap.add_argument("--unshuffled", action="store_true",
                    help="also attack a release published without shuffling")
    sys.path.insert(0, str(Path(__file__).parent))
    from code_system import add_option

    add_option(ap)
    args = ap.parse_args(argv)
    sizes = [2500, 25000] if args.quick else [int(s) for s in args.sizes.split(",")]
    rows = [run(n, args.k, args.m, not args.no_plain, args.unshuffled, args.repeat,
                args.code_system) for n in sizes]
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print(f"Disassociation, INFORMS-like data ({args.code_system}), k = {args.k}, m = {args.m}, "
          f"policy hierarchy:3digit (peak RSS is cumulative over the rows)")
    print("  ".join(c.rjust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).rjust(widths[c]) for c in cols))
    print("site verify s: the model verifier with the replay of HorPart, VerPart and Refine "
          "(issue 32; the site's verification); replay s: site verify s - verify s")
    print("closed s: schema check of the release bytes; verify s: the model verifier; "
          "verify/floor: (closed s + verify s) / plain np s, in wall seconds (cpu: in CPU "
          "seconds, time.process_time), each the fastest of --repeat runs taken in turn "
          "(each repeat: that run's own wall ratio, lowest to highest); attack/verify: attack s / "
          "(closed s + verify s); json MB: the same release as the JSON document published "
          "until issue 18; verified: schema, model and attack audit all passed")
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
