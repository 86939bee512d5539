"""ArtUC on data whose codes depend on age and gender (issue 18 goal 6, measurement).

Two datasets of the EHRD shape (age + gender, ICD-9 codes), same constraints (the paper's
UC1 for EHRD: 12-year age bands × chapters, gender All):

* ``realistic``: :mod:`ehr_release.samples.synthetic` fitted to the MIMIC-III demo
  (``../shared/data/mimic3-demo``) — code prevalence by age band and gender;
* ``independent``: ``bench/artuc.py``'s EHRD-like generator — codes independent of age and
  gender.

Parameters are the registry entry's (``registry.get("artuc")``) parsed from k, m=2,
δ=0.04, ε=6% of the distinct codes, the merge stop rule (``--stop``, default ``exhaust``)
and Step 19's order (``--order``): ``paper`` (least-UL cluster first, the default) and/or
``suppression-first`` (clusters that suppress codes first — a deviation from the paper,
``merge_order=suppression-first``). ``--gender kept`` uses UC1 with gender kept (F, M)
instead of All. ArtUC runs with ε unbounded so a run that Step 26 would refuse still
reports NCP, UL and the codes suppressed; ``×ε`` is suppressed / ε and ``ε met`` says
whether they stay within ε. Each case runs in its own process; GenDiag uses ``--workers``
processes.

    .venv/bin/python bench/artuc_realistic.py [--n 20000] [--k 5,10]
        [--data realistic,independent] [--order paper,suppression-first]
        [--gender all] [--stop exhaust] [--workers 2] [--code-system icd10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from functools import partial
from itertools import product
from pathlib import Path

import numpy as np
import yaml

from ehr_release import registry
from ehr_release.algorithms.artuc import Relaxing, artuc
from ehr_release.algorithms.artuc.artuc import in_process
from ehr_release.configuration.constraints import rt_data
from ehr_release.core.errors import ParameterError
from ehr_release.ingest import read_dataset
from ehr_release.model.dataset import Dataset
from ehr_release.parameters.params import parse_params
from ehr_release.registry.artuc import config_of, epsilon_of
from ehr_release.runtime.workers import gendiag_processes, usable_cpus
from ehr_release.samples.synthetic import fit, generate

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT.parent / "shared" / "data" / "mimic3-demo"
DEMO10 = ROOT / "examples" / "data" / "mimic3-demo-icd10"
CONFIG = {
    "attributes": {"age": {"type": "numerical", "domain": [0, 100]},
                   "gender": {"type": "categorical", "hierarchy": {"All": ["F", "M"]}}},
    "codes": {"hierarchy": "icd9"},
    "constraints": [{"name": "UC1", "age": {"bands": 12, "from": 0, "to": 107},
                     "gender": "All", "codes": "chapters"}],
}


def make(data: str, n: int, system: str = "icd9") -> Dataset:
    """``icd10``: the realistic generator fitted to the demo's ICD-10-CM copy (its codes
    mapped with the CMS GEMs), the independent one's codes mapped the same way."""
    if data == "realistic":
        demo = DEMO if system == "icd9" else DEMO10
        return generate(fit(read_dataset(demo)), n, np.random.default_rng(7))
    sys.path.insert(0, str(Path(__file__).parent))
    from artuc import ehrd_like  # bench/artuc.py
    from code_system import mapped  # bench/code_system.py

    dataset = ehrd_like(n)[0]
    return dataset if system == "icd9" else mapped(dataset)


def config_for(gender: str, system: str = "icd9") -> dict:
    """UC1 with gender All (the paper's) or kept as F / M, in the code system's hierarchy."""
    uc1 = {**CONFIG["constraints"][0], "gender": "All" if gender == "all" else ["F", "M"]}
    return {**CONFIG, "codes": {"hierarchy": system}, "constraints": [uc1]}


def run_case(data: str, n: int, k: int, stop: str, order: str, workers: int,
             config: Path, relax_delta: float | None = None, system: str = "icd9") -> dict:
    dataset = make(data, n, system)
    entry = registry.get("artuc")
    params = parse_params(entry.params, {"k": str(k), "m": "2", "delta": "0.04",
                                         "epsilon": "6%", "config": str(config),
                                         "merge_stop": stop, "merge_order": order})
    cfg = config_of(params)
    eps = epsilon_of(params, dataset)
    rt = rt_data(dataset, cfg)
    row = {"data": data, "records": dataset.n_patients,
           "codes": len(dataset.distinct_codes()),
           "avg codes": round(float(np.mean([len(c) for c in rt.codes])), 2),
           "k": k, "m": params["m"], "δ": params["delta"], "ε": round(eps, 1), "stop": stop,
           "order": order, "relax δ ≤": relax_delta or "–"}
    # Algorithm 2 (relax=true) merges above δ, up to relax_delta, while more than ε codes are
    # suppressed: it needs the real ε (the other rows run to exhaustion with ε = ∞).
    relaxing = None if relax_delta is None else Relaxing(relax_delta, eps)
    runner = partial(gendiag_processes, workers=workers) if workers > 1 else in_process
    start = time.perf_counter()
    try:
        anon = artuc(rt, cfg, k=params["k"], m=params["m"], delta=params["delta"],
                     epsilon=eps if relaxing else float("inf"), rng=np.random.default_rng(0),
                     gendiag_runner=runner, stop=params["merge_stop"],
                     order=params["merge_order"], relaxing=relaxing)
    except ParameterError as exc:  # Step 16 (δ)
        row["failed"] = f"{exc.parameter} {exc.value:g} {exc.rule.split(';')[0]}"
        row["seconds"] = round(time.perf_counter() - start, 1)
        return row
    row.update({"clusters": len(anon.clusters), "NCP": round(anon.ncp, 4),
                "UL": round(anon.ul, 4), "suppressed": anon.suppressed_codes,
                "×ε": round(anon.suppressed_codes / eps, 2),
                "ε met": "yes" if anon.suppressed_codes <= eps else "no",
                "seconds": round(time.perf_counter() - start, 1)})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--k", default="5,10")
    ap.add_argument("--data", default="realistic,independent")
    ap.add_argument("--stop", default="exhaust")
    ap.add_argument("--order", default="paper",
                    help="Step 19 orders to run, comma-separated: paper, suppression-first")
    ap.add_argument("--gender", default="all",
                    help="UC1's gender element(s), comma-separated: all (the paper's), kept")
    ap.add_argument("--workers", type=int, default=usable_cpus())
    ap.add_argument("--relax-delta", default="",
                    help="also run Algorithm 2 (relax=true) with these δ ceilings, "
                         "comma-separated (ε is not relaxed)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--relax", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--code-system", choices=("icd9", "icd10"), default="icd9",
                    help="icd10: ICD-10-CM data (the demo's GEM-mapped copy; bench/code_system)")
    args = ap.parse_args()
    if args.one:
        row = run_case(args.one, args.n, int(args.k), args.stop, args.order, args.workers,
                       Path(args.config), args.relax, args.code_system)
        print(json.dumps({**row, "UC1 gender": args.gender}, ensure_ascii=False))
        return
    relax_runs = [[]] + [["--relax", d] for d in args.relax_delta.split(",") if d]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for gender in args.gender.split(","):
            config = Path(tmp) / f"uc1-{gender}.yaml"
            config.write_text(yaml.safe_dump(config_for(gender, args.code_system),
                                             sort_keys=False),
                              encoding="utf-8")
            for data in args.data.split(","):
                for k in args.k.split(","):
                    for order, relax in product(args.order.split(","), relax_runs):
                        cmd = [sys.executable, __file__, "--one", data, "--n", str(args.n),
                               "--k", k, "--stop", args.stop, "--order", order,
                               "--gender", gender, "--workers", str(args.workers),
                               "--config", str(config), "--code-system", args.code_system,
                               *relax]
                        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
                        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    cols = list(dict.fromkeys(c for r in rows for c in r))
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r.get(c, "")) for c in cols))


if __name__ == "__main__":
    main()
