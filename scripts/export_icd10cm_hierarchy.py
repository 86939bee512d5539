"""Regenerate ``src/ehr_release/data/icd10cm_hierarchy.csv.gz`` from ``simple-icd-10-cm``.

Run once per ICD-10-CM edition, in any environment that has the package::

    python -m venv /tmp/icd10 && /tmp/icd10/bin/pip install simple-icd-10-cm==1.5.0
    /tmp/icd10/bin/python scripts/export_icd10cm_hierarchy.py

Why a build-time export rather than a run-time dependency: the package parses the CDC's
tabular XML (≈100K codes with the generated 7th-character extensions) on import, which takes
seconds in every process that checks a code — the CLI's preflight included — while the
hierarchy is fixed data. The CSV has the shape of ``icd9cm_hierarchy.csv``
(``code,parent,level,short_description,long_description``; the package has one description
per code, so the long one is left empty), gzip-compressed (16 MB → a tenth of it), so one
loader reads both, and the
edition (the CDC release the package bundles) is written beside it, for the certificate.

The tree written, with the levels of the ICD-9 file so that ``3digit|section|chapter`` keep
their meaning (category, block, chapter):

* ``ROOT`` (0) → chapter (1), named by its code range (``A00-B99``) → block (2, the innermost
  block that holds categories: ``C00-C14``, not the ``C00-C96`` range around it) → category
  (3, ``E11``) → subcategories and extensions (4–7, ``E11.9``, ``S72.001A``).
* Range blocks that hold no category directly (``C00-C96``) are left out: they would be
  childless leaves that are not codes.
* A block that is one category wide is named ``B10-B10`` so it differs from the category.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import sys
from importlib import metadata, resources
from pathlib import Path

import simple_icd_10_cm as cm

OUT = Path(__file__).resolve().parents[1] / "src" / "ehr_release" / "data"
CSV_PATH = OUT / "icd10cm_hierarchy.csv.gz"
EDITION_PATH = OUT / "icd10cm_edition.txt"
_RANGE = re.compile(r"\(([A-Z0-9]{3}-[A-Z0-9]{3})\)\s*$")


def edition() -> str:
    """``ICD-10-CM April 1, 2026`` from the name of the tabular file the package bundles."""
    names = [p.name for p in resources.files("simple_icd_10_cm.data").iterdir()]
    tabular = next(n for n in names if n.startswith("icd10") and n.endswith(".xml"))
    month, day, year = re.search(r"-([A-Za-z]+)-(\d+)-(\d{4})\.xml$", tabular).groups()
    return (f"ICD-10-CM {month} {day}, {year} (CDC tabular, "
            f"simple-icd-10-cm {metadata.version('simple_icd_10_cm')})")


def rows() -> list[tuple[str, str, int, str]]:
    """(code, parent, level, description) in the package's order, root first."""
    out: list[tuple[str, str, int, str]] = [("ROOT", "", 0, "root")]
    chapter = ""
    block_rows: dict[str, int] = {}
    block_used: set[str] = set()
    seen: set[str] = set()
    level: dict[str, int] = {}
    for code in cm.get_all_codes(True):
        desc = cm.get_description(code)
        if cm.is_chapter(code):
            name = _RANGE.search(desc).group(1)
            chapter = name
            out.append((name, "ROOT", 1, _RANGE.sub("", desc).strip()))
        elif code not in seen and cm.is_block(code):
            seen.add(code)
            name = code if "-" in code else f"{code}-{code}"
            block_rows[code] = len(out)
            # The package's order puts a chapter's blocks after it; get_parent() cannot be
            # asked of a one-category block, whose name is also its category's.
            out.append((name, chapter, 2, desc))
        else:
            seen.add(code)
            parent = cm.get_parent(code)
            if cm.is_category(code):
                block_used.add(parent)
                parent = out[block_rows[parent]][0]
                out.append((code, parent, 3, desc))
            else:
                out.append((code, parent, level[parent] + 1, desc))
            level[code] = out[-1][2]
    unused = {block_rows[b] for b in block_rows if b not in block_used}
    return [r for i, r in enumerate(out) if i not in unused]


def main() -> int:
    table = rows()
    names = [r[0] for r in table]
    if len(names) != len(set(names)):
        dup = sorted({n for n in names if names.count(n) > 1})[:5]
        raise SystemExit(f"node names collide: {dup}")
    # gzip without a timestamp (mtime=0) so that the same edition gives the same bytes.
    with gzip.GzipFile(CSV_PATH, "wb", mtime=0) as raw, \
            io.TextIOWrapper(raw, encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["code", "parent", "level", "short_description", "long_description"])
        for code, parent, level, desc in table:
            writer.writerow([code, parent, level, desc, ""])
    EDITION_PATH.write_text(edition() + "\n", encoding="utf-8")
    print(f"{len(table)} nodes, {edition()} → {CSV_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
