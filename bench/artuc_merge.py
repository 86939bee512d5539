"""ArtUC's merge step (issue 18 goal 4): CPU, GenDiag calls and the release's SHA-256.

Almost all of ArtUC's time on the bundled sample is Steps 18–22: GenDiag on C ∪ C′ for every
feasible partner C′ of the popped cluster. This prints, for one anonymization, the process
CPU seconds, wall seconds, how many GenDiag calls ran, and the SHA-256 of the release files
— so a change meant to make merging cheaper can be checked to leave every byte as it was
(run it before and after, in turn, on the same machine).

    PYTHONPATH=src .venv/bin/python bench/artuc_merge.py [--n 1500] [--seed 2014] [--k 10]
        [--delta 0.3] [--order paper] [--stop exhaust]
        [--config examples/artuc-mimic/config.yaml] [--capture calls.npz]
    PYTHONPATH=src .venv/bin/python bench/artuc_merge.py --replay calls.npz

"GenDiag calls" counts both kinds: full results, and the partner search's ULs
(:class:`~ehr_release.algorithms.artuc.gendiag.ULBatch`; the winner's result is then
computed in full, so each merge adds one call). ``--capture`` also saves every GenDiag call
of the run (the code table, k, m and each call's
rows); ``--replay`` runs each saved call with the compiled loop and with the Python loop
(``compiled=False``) and counts the calls whose results differ in any field.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import time
from pathlib import Path

import numpy as np

from ehr_release import registry
from ehr_release.algorithms.artuc import artuc
from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.gendiag import gendiag as gendiag_fn
from ehr_release.algorithms.artuc.release import release_files
from ehr_release.configuration.constraints import rt_data
from ehr_release.parameters.params import parse_params
from ehr_release.registry.artuc import config_of
from ehr_release.samples.sample import generate_sample

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=2014)
    ap.add_argument("--k", default="10")
    ap.add_argument("--delta", default="0.3")
    ap.add_argument("--order", default="paper")
    ap.add_argument("--stop", default="exhaust")
    ap.add_argument("--config", default=str(ROOT / "examples/artuc-mimic/config.yaml"))
    ap.add_argument("--capture", help="save every GenDiag call to this .npz")
    ap.add_argument("--replay", help="compare compiled and Python GenDiag on saved calls")
    args = ap.parse_args()
    if args.replay:
        replay(args.replay)
        return
    dataset = generate_sample(args.n, seed=args.seed)
    params = parse_params(registry.get("artuc").params, {
        "k": args.k, "m": "2", "delta": args.delta, "epsilon": "6%", "config": args.config,
        "merge_stop": args.stop, "merge_order": args.order})
    cfg = config_of(params)
    rt = rt_data(dataset, cfg)
    module = importlib.import_module("ehr_release.algorithms.artuc.artuc")
    calls, gendiag = [0], module.gendiag
    captured: list[np.ndarray] = []
    tables: list[CodeTable] = []

    def counted(table, rows, **kw):  # in_process looks GenDiag up in its module at each call
        calls[0] += 1
        if args.capture:
            tables[:] = [table]
            captured.append(np.asarray(rows, dtype=np.int64))
        return gendiag(table, rows, **kw)

    class CountedULs(module.ULBatch):  # the partner search's calls (ULs only)
        def __init__(self, table, clusters, k, m):
            super().__init__(table, clusters, k, m)
            calls[0] += len(clusters)
            if args.capture:
                tables[:] = [table]
                captured.extend(np.asarray(r, dtype=np.int64) for r in clusters)

    module.gendiag, module.ULBatch = counted, CountedULs
    cpu, wall = time.process_time(), time.perf_counter()
    anon = artuc(rt, cfg, k=params["k"], m=params["m"], delta=params["delta"],
                 epsilon=float("inf"), rng=np.random.default_rng(args.seed),
                 stop=params["merge_stop"], order=params["merge_order"])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    digest = hashlib.sha256()
    for name, data in sorted(release_files(anon).items()):
        digest.update(name.encode())
        digest.update(hashlib.sha256(data).digest())
    print(json.dumps({"patients": args.n, "seed": args.seed, "k": args.k,
                      "order": args.order, "stop": args.stop, "clusters": len(anon.clusters),
                      "gendiag calls": calls[0], "cpu s": round(cpu, 1),
                      "wall s": round(wall, 1), "release sha256": digest.hexdigest()}))
    if args.capture and tables:
        table = tables[0]
        lens = np.array([len(r) for r in captured], dtype=np.int64)
        extra = {} if table.weight is None else {"weight": table.weight}
        np.savez_compressed(args.capture, indptr=table.indptr, indices=table.indices,
                            code_set=table.code_set, k=params["k"], m=params["m"],
                            rows=np.concatenate(captured), lens=lens, **extra)


def replay(path: str) -> None:
    """Every saved call, compiled loop vs Python loop: all result fields must be equal."""
    data = dict(np.load(path))  # NpzFile would decompress an array at every access
    n_codes = len(data["code_set"])
    table = CodeTable([str(i) for i in range(n_codes)], data["indptr"], data["indices"],
                      data["code_set"], data.get("weight"))
    k, m = int(data["k"]), int(data["m"])
    bounds = np.concatenate([[0], np.cumsum(data["lens"])])
    differ, seconds = 0, {True: 0.0, False: 0.0}
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        rows = data["rows"][a:b]
        out = {}
        for compiled in (True, False):
            t = time.process_time()
            out[compiled] = gendiag_fn(table, rows, k, m, compiled=compiled)
            seconds[compiled] += time.process_time() - t
        got, want = out[True], out[False]
        same = all(np.array_equal(getattr(got, f), getattr(want, f))
                   for f in ("rows", "rec", "code", "item"))
        same = same and list(got.items.items()) == list(want.items.items()) and (
            got.ul_generalization, got.ul_suppression, got.suppressed) == (
            want.ul_generalization, want.ul_suppression, want.suppressed)
        differ += not same
    print(json.dumps({"calls": len(bounds) - 1, "k": k, "m": m, "differing": differ,
                      "compiled cpu s": round(seconds[True], 2),
                      "python cpu s": round(seconds[False], 2)}))


if __name__ == "__main__":
    main()
