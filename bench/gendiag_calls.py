"""Time GenDiag's compiled kernel on the calls of one ArtUC run, and hash what it returns.

The calls come from ``bench/artuc_merge.py --capture F`` (e.g. ``--n 10000 --k 5``: the
partner search's 222,284 calls). This runs every N-th one through
``gendiag_kernel.unweighted_gendiag`` and prints the CPU seconds and a SHA-256 of every
output array (records, codes, items, labels, UL floats, suppressed counts): a change to the
kernel must leave the hash as it was and can be timed before and after, in turn.

    PYTHONPATH=src .venv/bin/python bench/gendiag_calls.py F [--every 20]
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np

from ehr_release.algorithms.artuc import gendiag_kernel
from ehr_release.algorithms.artuc.gendiag import _POW2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("calls", help="a file written by bench/artuc_merge.py --capture")
    ap.add_argument("--every", type=int, default=20, help="time every N-th call")
    args = ap.parse_args()
    data = dict(np.load(args.calls))
    if "weight" in data:
        raise SystemExit("weighted code tables take the NumPy UL, not this kernel")
    indptr, indices, code_set = data["indptr"], data["indices"], data["code_set"]
    k, m = int(data["k"]), int(data["m"])
    bounds = np.concatenate([[0], np.cumsum(data["lens"])])
    calls = [data["rows"][a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    calls = calls[::args.every]
    gendiag_kernel.unweighted_gendiag(indptr, indices, code_set, calls[0], k, m, _POW2)  # load
    start = time.process_time()
    outputs = [gendiag_kernel.unweighted_gendiag(indptr, indices, code_set, rows, k, m, _POW2)
               for rows in calls]
    cpu = time.process_time() - start
    digest = hashlib.sha256()
    for output in outputs:
        for part in output:
            digest.update(np.asarray(part).tobytes())
    print(f"calls {len(calls)}  cpu s {cpu:.2f}  outputs sha256 {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
