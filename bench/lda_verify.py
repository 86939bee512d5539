"""LDA verification and attack audit against a NumPy floor (issue 18, goal 2).

A-GS is slow (``bench/lda.py``), so the release is made once per (n, k) and kept in
``--cache`` (default ``/tmp/ehr-release-bench-lda``): ``bench/lda.py``'s D50Pop-shaped
generator, ``--n`` trajectories, A-GS at k = 5. Then, each timed in wall and CPU (process)
seconds:

* ``closed s``: the closed-world schema check of the two files;
* ``verify s``: the LDA verifier (:func:`ehr_release.privacy.lda.check_trajectories`);
* ``attack s``: the trajectory adversary's audit (:func:`ehr_release.privacy.attacks.lda.
  attack_trajectories`);
* ``floor s``: one vectorized pass over the same original data doing the model's core
  counting — the trajectories flattened to (code, age) arrays, each patient's trajectory
  made one row, and the patients sharing each distinct trajectory counted (``np.unique``),
  as k-anonymity counts those sharing a published one. No parsing, no checks.

``verify/floor`` is (closed + verify) / floor, the goal's ratio (≤ 3 at scale).

Run: ``.venv/bin/python bench/lda_verify.py [--n 27639] [--repeat 2]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from gccens_verify import COLUMNS, print_row, timed  # noqa: E402  (bench/gccens_verify.py)
from lda import make_trajectories  # noqa: E402

from ehr_release.algorithms.lda import anonymize_trajectories, make_model  # noqa: E402
from ehr_release.algorithms.lda.release import release_files  # noqa: E402
from ehr_release.model.hierarchy import icd9_hierarchy  # noqa: E402
from ehr_release.privacy.attacks.lda import attack_trajectories  # noqa: E402
from ehr_release.privacy.closed_world import violations  # noqa: E402
from ehr_release.privacy.formats.lda import SCHEMA  # noqa: E402
from ehr_release.privacy.lda import LdaSettings, check_trajectories  # noqa: E402

K = 5


def release(trajs: list[list[tuple[str, int]]], ids: list[str], cache: Path
            ) -> dict[str, bytes]:
    """The A-GS release of ``trajs`` at k = 5, made once and kept in ``cache``."""
    where = cache / f"n{len(trajs)}-k{K}"
    names = ("trajectories.jsonl", "lda.json")
    if all((where / n).exists() for n in names):
        return {n: (where / n).read_bytes() for n in names}
    model = make_model(icd9_hierarchy(), [c for t in trajs for c, _ in t])
    result, wall, cpu = timed(anonymize_trajectories, trajs, K, model, "ags")
    print(f"A-GS made the release in {wall:.0f} s ({cpu:.0f} CPU s)", flush=True)
    meta = {"algorithm": "lda", "method": "ags", "k": K, "w_icd": 0.5, "w_age": 0.5,
            "leaf_count": 0, "age_domain": [1, 128], "hierarchy": "ICD-9-CM"}
    files = release_files(ids, result, meta)
    where.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (where / name).write_bytes(data)
    return files


def floor(trajs: list[list[tuple[str, int]]]) -> int:
    """Distinct trajectories and their sizes, vectorized (the yardstick)."""
    lengths = np.fromiter(map(len, trajs), dtype=np.int64, count=len(trajs))
    pairs = list(chain.from_iterable(trajs))
    codes = pd.factorize(np.fromiter((c for c, _ in pairs), dtype=object,
                                     count=len(pairs)))[0]
    ages = np.fromiter((a for _, a in pairs), dtype=np.int64, count=len(pairs))
    row = np.repeat(np.arange(len(trajs)), lengths)
    pos = np.arange(len(pairs)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    table = np.full((len(trajs), int(lengths.max()) if len(trajs) else 1), -1, np.int64)
    table[row, pos] = codes * 256 + ages
    _, sizes = np.unique(table, axis=0, return_counts=True)
    return int(sizes.min())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=27_639)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/ehr-release-bench-lda"))
    ap.add_argument("--skip-attack", action="store_true")
    args = ap.parse_args(argv)
    trajs = make_trajectories(args.n)
    ids = [f"P{i:06d}" for i in range(len(trajs))]
    files = release(trajs, ids, args.cache)
    digest = hashlib.sha256(files["trajectories.jsonl"]).hexdigest()[:16]
    print(f"{args.n:,} trajectories, A-GS k = {K}: trajectories.jsonl "
          f"{len(files['trajectories.jsonl']) / 1e6:.1f} MB, sha256 {digest}…; "
          f"lda.json {json.loads(files['lda.json'])['ilm']:.4f} ILM")
    h = icd9_hierarchy()
    print("  ".join(COLUMNS))
    ok = True
    for run in range(args.repeat):
        _, t_floor, c_floor = timed(floor, trajs)
        found, t_closed, c_closed = timed(lambda: list(violations(files, SCHEMA)))
        report, t_ver, c_ver = timed(check_trajectories, files, ids, trajs, h, LdaSettings(K))
        t_att = c_att = float("nan")
        if not args.skip_attack:
            audit, t_att, c_att = timed(attack_trajectories, files, trajs, h, K, ids)
            ok &= audit.passed
        ok &= report.holds and not found
        print_row(run, (t_closed, c_closed), (t_ver, c_ver), (t_att, c_att), (t_floor, c_floor))
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB; "
          f"verified and attack passed: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
