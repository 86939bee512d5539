"""Registry glue for ``artuc-baseline``: the paper's Baseline comparator of ArtUC.

Each constraint group is published with its constraint's values as demographics (pre-
generalization, like Takahashi et al.) and GenDiag makes its codes k^m-anonymous. It takes
the same parameters as ``artuc``; δ does not bound Baseline itself (its NCP is whatever the
constraints dictate) and is used only when evaluation runs the comparators.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ehr_release.algorithms.artuc import RECORDS_FILE
from ehr_release.dataset import Dataset
from ehr_release.privacy.attacks.kkm import attack
from ehr_release.privacy.formats.kkm import SCHEMA, count_records
from ehr_release.registry import AlgorithmEntry, ReleaseFiles
from ehr_release.registry.artuc import PARAMS, config_defaults, evaluate, run, verify

NAME = "artuc-baseline"


def _anonymize(dataset: Dataset, params: dict[str, Any],
               rng: np.random.Generator) -> ReleaseFiles:
    return {RECORDS_FILE: run(NAME, dataset, params, rng)}


ENTRY = AlgorithmEntry(
    name=NAME,
    summary="ArtUC's Baseline: demographics replaced by their utility constraint's values, "
            "codes made k^m-anonymous per constraint group",
    privacy_model="(k, k^m)-anonymity: an attacker knowing all demographics and up to m codes "
                  "of a patient cannot tell its record from ≥ k−1 others",
    params=PARAMS,
    anonymize=_anonymize,
    verify=lambda files, original, params: verify(NAME, files, original, params),
    evaluate=lambda files, original, params, rng: evaluate(NAME, files, original, params, rng),
    headline_loss="ARE W3",
    schema=SCHEMA,
    attack=attack,
    count_records=count_records,
    defaults_from=config_defaults,
)
