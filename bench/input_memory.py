"""What reading an extract costs in memory, per row and per input byte (issue 33 part 3).

The input limits (:mod:`ehr_release.ingest.limits`) refuse a table whose read would not fit
the site's memory budget; their cost constants come from here. For each size the script
writes the project's synthetic sample (wide CSV and Parquet, ~7 codes a patient), reads it
with the full reader (:func:`ehr_release.ingest.readers.read_dataset`) in a fresh
interpreter, and prints the peak resident memory above that interpreter's baseline, per
row, per cell and per byte of the file as read (a CSV's size, a Parquet file's uncompressed
size from its footer):

    .venv/bin/python bench/input_memory.py [--rows 50000 200000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

_CHILD = """
import json, resource, sys
import pandas, pyarrow.parquet  # the baseline includes the libraries
from ehr_release.ingest.readers import read_dataset
def rss_kib():  # resident now (ru_maxrss would count the imports' own peak)
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
base = rss_kib()
data = read_dataset(sys.argv[1])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"kib": peak - base, "rows": data.n_patients,
                  "columns": len(data.patients.columns) + 2}))
"""


def _input_bytes(path: Path) -> int:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        meta = pq.read_metadata(path)
        return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[50_000, 200_000])
    parser.add_argument("--dir", type=Path, default=Path("/tmp"))
    args = parser.parse_args()
    from ehr_release.samples.sample import generate_sample, write_sample

    for n in args.rows:
        dataset = generate_sample(n, seed=1)
        for suffix in (".csv", ".parquet"):
            path = write_sample(dataset, args.dir / f"input_memory_{n}{suffix}")
            out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], check=True,
                                 capture_output=True, text=True).stdout
            got = json.loads(out)
            size = _input_bytes(path)
            peak = got["kib"] * 1024
            print(f"{suffix[1:]:8} {n:>9,} rows  {size / 1e6:8.1f} MB as read  peak "
                  f"+{peak / 1e6:8.1f} MB  {peak / n:7.0f} B/row  "
                  f"{peak / (n * got['columns']):6.0f} B/cell  {peak / size:5.1f} B/byte")
            path.unlink()


if __name__ == "__main__":
    main()
