"""The per-chunk estimator's answers do not depend on Python's hash seed.

A set of strings iterates in an order that changes with each process's hash seed; the
estimator multiplies and adds floats per code and per joint cluster, so visiting them in
set order made the last bits of "ARE W1 (estimator)" differ between two seeded runs of the
same comparison (seen in ``bench/compare.py``'s metrics SHA-256).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import numpy as np
from ehr_release.algorithms.disassociation import disassociate_dataset
from ehr_release.configuration.policies import hierarchy_policy
from ehr_release.samples.sample import generate_sample
from ehr_release.utility.disassociation import ReleaseEstimator, W1_MIN_SUPPORT, w1_workload
ds = generate_sample(4000, seed=2014)
policy = hierarchy_policy(ds.distinct_codes(), "3digit")
release = disassociate_dataset(ds, 10, 2, policy, np.random.default_rng(1)).release
assert release.joint_clusters, "the case needs joint clusters"
codes = ds.code_sets()
estimate = ReleaseEstimator(release).count
print([repr(estimate(q)) for q in w1_workload(codes, max(10, int(W1_MIN_SUPPORT * len(codes))))])
"""


def test_estimates_are_the_same_floats_under_any_hash_seed() -> None:
    src = str(Path(__file__).resolve().parents[1] / "src")
    outputs = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        env = {**os.environ, "PYTHONHASHSEED": seed,
               "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                              text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1
