"""SHA-256 of ArtUC's release on the identity cases a speed change must leave byte-identical.

Seven (or more) cases: the bundled sample (``examples/artuc-mimic/config.yaml``, δ = 0.3)
with both Step 19 orders and ``merge_stop=paper``, and the realistic EHRD-shaped data of
``bench/artuc_realistic.py`` (UC1, δ = 0.04) plain and under Algorithm 2 (``relax``).
Run it from both trees (old and new code) and compare the lines.

    PYTHONPATH=src .venv/bin/python bench/artuc_identity.py [--cases 1,2,...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from ehr_release import registry
from ehr_release.algorithms.artuc import Relaxing, artuc
from ehr_release.algorithms.artuc.release import release_files
from ehr_release.configuration.constraints import rt_data
from ehr_release.parameters.params import parse_params
from ehr_release.registry.artuc import config_of, epsilon_of
from ehr_release.samples.sample import generate_sample

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from artuc_realistic import config_for, make  # noqa: E402

#: (data, patients, k, δ, order, stop, relax δ ceiling or None)
CASES = [
    ("sample", 1000, 10, 0.3, "paper", "exhaust", None),
    ("sample", 2000, 10, 0.3, "suppression-first", "exhaust", None),
    ("sample", 1500, 5, 0.3, "paper", "paper", None),
    ("sample", 1500, 25, 0.3, "suppression-first", "paper", None),
    ("realistic", 1500, 5, 0.04, "paper", "exhaust", None),
    ("realistic", 2000, 10, 0.04, "suppression-first", "exhaust", None),
    ("realistic", 2000, 10, 0.04, "paper", "exhaust", 0.1),
    ("realistic", 1500, 5, 0.02, "suppression-first", "exhaust", 0.1),
    ("sample", 1500, 10, 0.15, "paper", "exhaust", 0.3),
]


def run(case: tuple, config: Path) -> dict:
    data, n, k, delta, order, stop, relax = case
    dataset = generate_sample(n, seed=2014) if data == "sample" else make("realistic", n)
    cfg_path = ROOT / "examples/artuc-mimic/config.yaml" if data == "sample" else config
    params = parse_params(
        registry.get("artuc").params,
        {
            "k": str(k),
            "m": "2",
            "delta": str(delta),
            "epsilon": "6%",
            "config": str(cfg_path),
            "merge_stop": stop,
            "merge_order": order,
        },
    )
    cfg = config_of(params)
    eps = epsilon_of(params, dataset)
    # ε ceiling unbounded: Algorithm 2 relaxes δ (up to ``relax``) while more than ε codes
    # are suppressed, and the run is kept even if ε stays missed
    relaxing = None if relax is None else Relaxing(relax, float("inf"))
    cpu = time.process_time()
    anon = artuc(
        rt_data(dataset, cfg),
        cfg,
        k=params["k"],
        m=params["m"],
        delta=params["delta"],
        epsilon=eps if relaxing else float("inf"),
        rng=np.random.default_rng(0),
        stop=params["merge_stop"],
        order=params["merge_order"],
        relaxing=relaxing,
    )
    cpu = time.process_time() - cpu
    digest = hashlib.sha256()
    for name, blob in sorted(release_files(anon).items()):
        digest.update(name.encode())
        digest.update(hashlib.sha256(blob).digest())
    return {
        "case": list(case),
        "clusters": len(anon.clusters),
        "relaxations": [r.describe() for r in anon.relaxations],
        "suppressed": anon.suppressed_codes,
        "cpu s": round(cpu, 1),
        "release sha256": digest.hexdigest(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(str(i) for i in range(1, len(CASES) + 1)))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "uc1-all.yaml"
        config.write_text(yaml.safe_dump(config_for("all"), sort_keys=False), encoding="utf-8")
        for i in args.cases.split(","):
            print(json.dumps({"n": int(i), **run(CASES[int(i) - 1], config)}), flush=True)


if __name__ == "__main__":
    main()
