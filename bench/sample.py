"""Sample generator throughput: patients per second and peak memory, 100 → 1,000,000.

Run: ``.venv/bin/python bench/sample.py [--max 1000000]``. Each size runs in a fresh
process so the peak resident memory reported is that size's own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, resource, sys, time
from ehr_release.samples.sample import generate_sample
n, longitudinal = int(sys.argv[1]), sys.argv[2] == "1"
t = time.perf_counter()
ds = generate_sample(n, seed=1, longitudinal=longitudinal)
elapsed = time.perf_counter() - t
print(json.dumps({"seconds": elapsed, "codes": len(ds.diagnoses),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(n: int, longitudinal: bool) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), "1" if longitudinal else "0"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"{'patients':>10} {'longit.':>8} {'codes':>11} {'seconds':>8} {'peak MB':>8}")
    for n in (100, 10_000, 100_000, 1_000_000):
        if n > args.max:
            break
        for longitudinal in (False, True):
            r = measure(n, longitudinal)
            print(f"{n:>10,} {str(longitudinal):>8} {r['codes']:>11,} {r['seconds']:>8.2f} "
                  f"{r['peak_mb']:>8.0f}")


if __name__ == "__main__":
    main()
