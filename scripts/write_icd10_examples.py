"""Write the ICD-10-CM copies of the shipped examples' data, mapped with the CMS GEMs.

    python scripts/write_icd10_examples.py            # writes under examples/data/
    python scripts/write_icd10_examples.py OUT_ROOT   # elsewhere (the test compares)

* ``examples/data/sample-icd10/patients.csv`` — the bundled sample
  (``examples/demo/patients.csv``, 1,000 synthetic patients) with every ICD-9-CM code of the
  ``codes`` cell replaced by its ICD-10-CM node, in the cell's order;
* ``examples/data/mimic3-demo-icd10/`` — the MIMIC-III demo's three tables, ``PATIENTS`` and
  ``ADMISSIONS`` copied byte for byte, ``DIAGNOSES_ICD`` with ``ICD9_CODE`` replaced by
  ``ICD_CODE`` holding the ICD-10-CM node, undotted as MIMIC writes codes (a block such as
  ``E08-E13`` as it is), and its licence.

Each code goes through :func:`ehr_release.ingest.gem.map_icd9` — the rules of the request
option ``code_mapping: gem`` — so reading these copies gives the same patients and codes as
reading the ICD-9 originals with that option (``tests/test_icd10_examples.py``). A code the
GEMs leave unmapped is dropped with its diagnosis row (the mapping's losses are printed).
Blank codes (a few MIMIC rows) stay blank.
"""

from __future__ import annotations

import csv
import shutil
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ehr_release.ingest.gem import map_icd9  # noqa: E402
from ehr_release.ingest.rules import split_codes  # noqa: E402
from ehr_release.model.hierarchy import normalize_icd9  # noqa: E402

SAMPLE = REPO / "examples" / "demo" / "patients.csv"
MIMIC = REPO / "examples" / "data" / "mimic3-demo"


def mapped(code: str, tally: Counter[str]) -> str | None:
    """The ICD-10-CM node of one ICD-9-CM code as written (None: unmapped)."""
    node, outcome = map_icd9(normalize_icd9(code))
    tally[outcome] += 1
    return node


def write_sample(out: Path, tally: Counter[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with SAMPLE.open(newline="") as src, (out / "patients.csv").open("w", newline="") as dst:
        reader = csv.DictReader(src)
        writer = csv.DictWriter(dst, reader.fieldnames or [], lineterminator="\n")
        writer.writeheader()
        for row in reader:
            codes = [mapped(c, tally) for c in split_codes(row["codes"])]
            row["codes"] = ";".join(c for c in codes if c is not None)
            writer.writerow(row)
    return out


def write_mimic(out: Path, tally: Counter[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for name in ("PATIENTS.csv", "ADMISSIONS.csv", "LICENSE.txt"):
        shutil.copyfile(MIMIC / name, out / name)
    with (MIMIC / "DIAGNOSES_ICD.csv").open(newline="") as src, \
            (out / "DIAGNOSES_ICD.csv").open("w", newline="") as dst:
        reader = csv.DictReader(src)
        fields = ["ICD_CODE" if f == "ICD9_CODE" else f for f in reader.fieldnames or []]
        writer = csv.DictWriter(dst, fields, lineterminator="\n")
        writer.writeheader()
        for row in reader:
            code = row.pop("ICD9_CODE")
            node = mapped(code, tally) if code else ""
            if node is None:
                continue
            writer.writerow({**row, "ICD_CODE": node if "-" in node else node.replace(".", "")})
    return out


def main(root: Path) -> None:
    for name, write in (("sample-icd10", write_sample), ("mimic3-demo-icd10", write_mimic)):
        tally: Counter[str] = Counter()
        write(root / name, tally)
        print(f"{name}: {dict(sorted(tally.items()))} (diagnosis rows by outcome)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "examples" / "data")
