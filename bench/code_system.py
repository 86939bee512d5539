"""``--code-system icd10`` for the benchmarks: the same generated patients, coded in ICD-10-CM.

The generators draw ICD-9-CM codes (the papers' data were ICD-9). Rather than a second
generator with other statistics, ``icd10`` maps each generated code with the CMS GEMs by the
request option's own rules (:func:`ehr_release.ingest.gem.map_icd9`): what differs from the
ICD-9 run is the code system alone — the hierarchy the algorithms generalize in, its fan-out
and depth — plus the GEM's losses (codes dropped, several ICD-9 codes merging into one
ICD-10-CM code), which :func:`describe` prints so the figures can be read next to ICD-9's.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from functools import cache

from ehr_release.ingest.gem import ONE_TO_MANY, UNMAPPED, map_icd9
from ehr_release.model.dataset import CODE, Dataset
from ehr_release.model.hierarchy import Hierarchy, code_hierarchy

CHOICES = ("icd9", "icd10")


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--code-system", choices=CHOICES, default="icd9",
                        help="icd10: the generated codes mapped to ICD-10-CM with the CMS GEMs")


def hierarchy(system: str) -> Hierarchy:
    return code_hierarchy(system)


@cache
def to_icd10(code: str) -> str | None:
    """The ICD-10-CM code of one generated ICD-9-CM code (None: the GEMs drop it)."""
    return map_icd9(code)[0]


def describe(codes: Iterable[str]) -> str:
    """The GEM mapping of these distinct ICD-9-CM codes in one line (counts)."""
    outcomes = [map_icd9(c)[1] for c in set(codes)]
    kept = {to_icd10(c) for c in set(codes)} - {None}
    return (f"ICD-10-CM by the GEMs: {len(outcomes):,} ICD-9 codes → {len(kept):,} ICD-10 "
            f"codes ({outcomes.count(ONE_TO_MANY):,} generalized, "
            f"{outcomes.count(UNMAPPED):,} dropped)")


def mapped(dataset: Dataset) -> Dataset:
    """``dataset`` with every code mapped to ICD-10-CM (dropped ones gone, two ICD-9 codes
    that map to one ICD-10-CM code kept once per patient and age)."""
    diag = dataset.diagnoses
    codes = diag[CODE].map({c: to_icd10(c) for c in diag[CODE].unique()})
    keep = codes.notna().to_numpy()
    out = diag.assign(**{CODE: codes})[keep].drop_duplicates().reset_index(drop=True)
    return Dataset(dataset.patients, out, class_column=dataset.class_column,
                   source=f"{dataset.source} (ICD-10-CM by the GEMs)", code_system="icd10")
