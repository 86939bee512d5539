"""Registry glue for ``rmr``: (k, k^m)-anonymity without utility constraints (RmR).

The comparator ArtUC is measured against (Poulis et al. 2013): demographics clustered under
the NCP bound δ, clusters merged by UL, codes set-generalized with no limit on which codes
may be generalized together. The configuration still supplies the released attributes, their
hierarchies and domains; its utility constraints are ignored by the algorithm and the
verifier, and only used by evaluation to show how many records RmR leaves outside them.
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

NAME = "rmr"


def _anonymize(dataset: Dataset, params: dict[str, Any],
               rng: np.random.Generator) -> ReleaseFiles:
    return {RECORDS_FILE: run(NAME, dataset, params, rng)}


ENTRY = AlgorithmEntry(
    name=NAME,
    summary="RmR: (k, k^m)-anonymity of demographics + diagnosis codes under an NCP bound, "
            "without utility constraints",
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
