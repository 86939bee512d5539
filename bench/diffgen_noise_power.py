"""Power of DiffGen's count checks by release size (issue 32, finding 4).

For n groups = 50, 200, 1000, 5000, draws releases of the declared discrete Laplace noise at
the scale of an Adult ε = 1, h = 10 release (s = 52/31 ≈ 1.68) over Adult-like true counts
(84 % of the groups empty, as on Adult; the rest geometric with mean ≈ 33), forges each of
the four count columns of finding 4 from the honest one, and reports how often the verifier's
count checks (:func:`too_many_small` and :func:`noise_tests`, each at 10⁻⁶/7) flag it; the
``honest`` column is the false-alarm rate seen (≤ 10⁻⁶ by construction). Prints a Markdown
table (it is the one in docs/reliability.md).

    .venv/bin/python bench/diffgen_noise_power.py [--reps 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from ehr_release.privacy.diffgen_counts import FALSE_ALARM, too_many_small
from ehr_release.privacy.diffgen_noise import SHARES, noise_tests

SCALE = 52 / 31
SIZES = (50, 200, 1000, 5000)


def _forged(count: np.ndarray, true: np.ndarray, rng: np.random.Generator
            ) -> dict[str, np.ndarray]:
    r = count - true
    return {
        "honest": count,
        "true + 1": true + 1,
        "true ± 1": np.maximum(true + rng.choice([-1, 1], size=len(true)), 0),
        "odd residuals pushed from 0": np.maximum(
            true + r + np.where(r % 2 == 1, np.sign(r), 0), 0),
        "residuals ÷ 4": true + (np.sign(r) * np.ceil(np.abs(r) / 4)).astype(np.int64),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    alpha = math.exp(-1 / SCALE)
    share = FALSE_ALARM / SHARES
    columns = list(_forged(np.zeros(1, np.int64), np.zeros(1, np.int64), rng))
    print("| groups | " + " | ".join(columns) + " |")
    print("|---:|" + "---:|" * len(columns))
    for n in SIZES:
        caught = dict.fromkeys(columns, 0)
        for _ in range(args.reps):
            true = np.where(rng.random(n) < 0.84, 0, rng.geometric(0.03, n)).astype(np.int64)
            z = rng.geometric(1 - alpha, n) - rng.geometric(1 - alpha, n)
            count = np.maximum(true + z, 0)
            for name, forged in _forged(count, true, rng).items():
                r = forged - true
                caught[name] += (too_many_small(r, true, SCALE, share).flagged
                                 or noise_tests(r, true, SCALE, share).flagged)
        print(f"| {n:,} | " + " | ".join(f"{caught[c] / args.reps:.2f}" for c in columns)
              + " |")


if __name__ == "__main__":
    main()
