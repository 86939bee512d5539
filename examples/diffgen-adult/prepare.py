"""Write the UCI Adult files as the wide extract `ehr-release run` reads (adult.csv).

    python examples/diffgen-adult/prepare.py [ADULT_FOLDER] [OUT_CSV]

Defaults: ../data/adult (shipped with the examples, CC BY 4.0) and adult.csv in this folder. Records
with a missing value are dropped (45,222 remain); `codes` is empty (Adult has no diagnoses).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ehr_release.configuration.taxonomies.adult import adult_frame

HERE = Path(__file__).resolve().parent


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent / "data" / "adult"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "adult.csv"
    frame = adult_frame(folder)
    frame.to_csv(out, index=False)
    print(f"{out} ({len(frame):,} records)")


if __name__ == "__main__":
    main()
