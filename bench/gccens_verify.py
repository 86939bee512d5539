"""GCCens verification and attack audit at scale against a NumPy floor (issue 18, goal 2).

The data are ``bench/gccens.py``'s thesis-shaped population (four codes, a long tail of
repeats) at ``--population`` records and a sample of ``--sample`` of them; GCCens runs once
(k = 5, caps 3) and its release bytes are then checked three ways, each timed in wall and CPU
(process) seconds:

* ``closed s``: the closed-world schema check of the two files;
* ``verify s``: the k-map verifier (:func:`ehr_release.privacy.gccens.check_kmap`);
* ``attack s``: the k-map adversary's audit (:func:`ehr_release.privacy.attacks.gccens.
  attack_kmap`);
* ``floor s``: one vectorized pass over the same inputs the verifier gets (the population's
  and the released records' code → count maps) doing the model's core counting: for every
  distinct released record, how many population records contain it. Flattening the maps,
  encoding the codes, grouping the population into distinct rows and the containment test,
  all in NumPy; no parsing, no checks.

``verify/floor`` is (closed + verify) / floor, the goal's ratio (≤ 3). The SHA-256 of
``censored.jsonl`` is printed so a change of reader can be shown not to change the bytes.

Run: ``.venv/bin/python bench/gccens_verify.py [--population 2000000] [--sample 1000000]``
(``--skip-attack`` leaves the attack out; ``--repeat N`` times the checks N times in turn).
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import sys
import time
from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from gccens import as_multisets, draw_sample, make_population  # noqa: E402

from ehr_release.algorithms.gccens import PopulationIndex, gccens  # noqa: E402
from ehr_release.algorithms.gccens.release import RECORDS_FILE, release_files  # noqa: E402
from ehr_release.privacy.attacks.gccens import attack_kmap  # noqa: E402
from ehr_release.privacy.closed_world import violations  # noqa: E402
from ehr_release.privacy.formats.gccens import SCHEMA  # noqa: E402
from ehr_release.privacy.gccens import check_kmap  # noqa: E402

K, CAP = 5, 3


def timed(fn, *args):
    """(result, wall s, CPU s) of ``fn(*args)``."""
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - w, time.process_time() - c


COLUMNS = ("run", "closed s", "verify s", "attack s", "floor s", "verify/floor",
           "attack/floor", "CPU closed+verify", "CPU attack", "CPU floor", "CPU ratio")


def print_row(run: int, closed: tuple[float, float], verify: tuple[float, float],
              attack: tuple[float, float], floor: tuple[float, float]) -> None:
    """One row under :data:`COLUMNS`: each timing is (wall s, CPU s); the ratios are
    (closed + verify) / floor and attack / floor (``bench/lda_verify.py`` prints the same)."""
    (t_closed, c_closed), (t_ver, c_ver), (t_att, c_att), (t_floor, c_floor) = (
        closed, verify, attack, floor)
    print("  ".join(str(v) for v in (
        run, f"{t_closed:.2f}", f"{t_ver:.2f}", f"{t_att:.2f}", f"{t_floor:.2f}",
        f"{(t_closed + t_ver) / t_floor:.2f}", f"{t_att / t_floor:.2f}",
        f"{c_closed + c_ver:.2f}", f"{c_att:.2f}", f"{c_floor:.2f}",
        f"{(c_closed + c_ver) / c_floor:.2f}")), flush=True)


def _flat(records: list[dict[str, int]]) -> tuple[np.ndarray, list[str], np.ndarray]:
    lengths = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
    codes = list(chain.from_iterable(records))
    counts = np.fromiter(chain.from_iterable(map(dict.values, records)), dtype=np.int64,
                         count=len(codes))
    return lengths, codes, counts


def floor(population: list[dict[str, int]], released: list[dict[str, int]]) -> np.ndarray:
    """dis() of every distinct released record, vectorized (the yardstick)."""
    r_len, r_codes, r_counts = _flat(released)
    vocab = pd.Index(pd.unique(np.array(r_codes, dtype=object)))
    r_rows = np.repeat(np.arange(len(released)), r_len)
    wanted = np.zeros((len(released), len(vocab)), dtype=np.int64)
    wanted[r_rows, vocab.get_indexer(r_codes)] = r_counts
    wanted = np.unique(wanted, axis=0)
    p_len, p_codes, p_counts = _flat(population)
    col = vocab.get_indexer(p_codes)
    keep = col >= 0
    held = np.zeros((len(population), len(vocab)), dtype=np.int64)
    held[np.repeat(np.arange(len(population)), p_len)[keep], col[keep]] = p_counts[keep]
    top = wanted.max(axis=0)
    assert float(np.prod(top + 1.0)) < 2.0 ** 62, "one integer per row needs few codes"
    held = np.minimum(held, top)
    radix = np.cumprod(np.concatenate([[1], top[:-1] + 1]))  # one integer per clipped row
    keys, weight = np.unique(held @ radix, return_counts=True)
    profiles = keys[:, None] // radix % (top + 1)
    contains = (profiles[None, :, :] >= wanted[:, None, :]).all(axis=2)
    return contains.astype(np.int64) @ weight


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--population", type=int, default=2_000_000)
    ap.add_argument("--sample", type=int, default=1_000_000)
    ap.add_argument("--skip-attack", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    counts = make_population(args.population)
    rows = draw_sample(counts, args.sample)
    population, sample = as_multisets(counts), as_multisets(counts[rows])
    ids = [f"P{i:08d}" for i in rows]
    caps = {"*": CAP}
    result, t_anon, c_anon = timed(gccens, sample, PopulationIndex(population), K, caps)
    files = release_files(ids, result, k=K, population={"records": args.population,
                                                        "fingerprint": "bench"})
    digest = hashlib.sha256(files[RECORDS_FILE]).hexdigest()[:16]
    print(f"population {args.population:,}, sample {args.sample:,}, k = {K}, caps {CAP}: "
          f"anonymize {t_anon:.1f} s ({c_anon:.1f} CPU s); {RECORDS_FILE} "
          f"{len(files[RECORDS_FILE]) / 1e6:.1f} MB, sha256 {digest}…")
    print("  ".join(COLUMNS))
    ok = True
    for run in range(args.repeat):
        dis, t_floor, c_floor = timed(floor, population, result.released)
        found, t_closed, c_closed = timed(lambda: list(violations(files, SCHEMA)))
        report, t_ver, c_ver = timed(check_kmap, files, ids, sample, population, K, caps)
        t_att = c_att = float("nan")
        if not args.skip_attack:
            audit, t_att, c_att = timed(attack_kmap, files, ids, sample, population, K, caps)
            ok &= audit.passed
        ok &= report.holds and not found and int(dis.min()) >= K
        print_row(run, (t_closed, c_closed), (t_ver, c_ver), (t_att, c_att), (t_floor, c_floor))
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB; "
          f"verified, attack passed and floor ≥ k: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
