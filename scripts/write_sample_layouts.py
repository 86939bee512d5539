"""Write the same generated patients as a wide CSV, an OMOP CDM folder, a FHIR bulk export
and a MIMIC-IV ``hosp`` folder (see :mod:`ehr_release.samples.sample_layouts`), for trying the
readers from a fresh clone::

    python scripts/write_sample_layouts.py /tmp/layouts --patients 300 --code-system icd10
    ehr-release run --input /tmp/layouts/omop --algorithm disassociation \\
        --param k=5 --requester steward.sam

Nothing here is derived from real patients (:func:`ehr_release.samples.sample.generate_sample`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ehr_release.samples.sample import generate_sample
from ehr_release.samples.sample_layouts import LAYOUTS, WRITERS, numbered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--patients", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--code-system", choices=("icd9", "icd10"), default="icd10")
    args = parser.parse_args()
    patients = numbered(generate_sample(args.patients, seed=args.seed, longitudinal=True,
                                        code_system=args.code_system))
    args.out.mkdir(parents=True, exist_ok=True)
    for layout in LAYOUTS:
        target = args.out / ("patients.csv" if layout == "csv" else layout)
        print(WRITERS[layout](patients, target))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
