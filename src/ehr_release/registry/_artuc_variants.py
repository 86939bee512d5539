"""One factory for the registry entries that are ArtUC's own code run another way.

``artuc-baseline`` and ``artuc-unconstrained`` differ only in their name, summary and what
the verifier checks (issue 17: their modules used to be copies). Both run through
:func:`ehr_release.registry.artuc.run`, take ArtUC's parameters and are evaluated by ArtUC's
evaluation. This module registers no entry of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ehr_release.privacy.formats.kkm import SCHEMA, count_records
from ehr_release.registry import AlgorithmEntry, ReleaseFiles
from ehr_release.registry.artuc import (
    PARAMS,
    attack,
    config_defaults,
    config_of,
    epsilon_of,
    evaluate,
    prepare_inputs,
    run,
)
from ehr_release.reports import VerificationReport

if TYPE_CHECKING:  # annotations only: parameters are checked before pandas loads
    import numpy as np

    from ehr_release.dataset import Dataset

PRIVACY_MODEL = ("(k, k^m)-anonymity: an attacker knowing all demographics and up to m codes "
                 "of a patient cannot tell its record from ≥ k−1 others")


def artuc_variant(name: str, summary: str, *, ncp_bound: bool,
                  constrained: bool) -> AlgorithmEntry:
    """The entry for ``name``; ``ncp_bound``: the verifier checks NCP ≤ δ; ``constrained``:
    it checks the utility constraints (Def. 9)."""

    def anonymize(dataset: Dataset, params: dict[str, Any],
                  rng: np.random.Generator) -> ReleaseFiles:
        from ehr_release.algorithms.artuc import RECORDS_FILE

        return {RECORDS_FILE: run(name, dataset, params, rng)}

    def verify(files: ReleaseFiles, original: Dataset,
               params: dict[str, Any]) -> VerificationReport:
        from ehr_release.privacy.kkm import verify_kkm

        return verify_kkm(files, original, config_of(params), algorithm=name, k=params["k"],
                          m=params["m"], delta=params["delta"] if ncp_bound else None,
                          epsilon=epsilon_of(params, original), constrained=constrained)

    return AlgorithmEntry(
        name=name,
        summary=summary,
        privacy_model=PRIVACY_MODEL,
        params=PARAMS,
        anonymize=anonymize,
        verify=verify,
        evaluate=lambda files, original, params, rng: evaluate(name, files, original, params,
                                                               rng),
        headline_loss="ARE W3",
        schema=SCHEMA,
        attack=attack,
        count_records=count_records,
        defaults_from=config_defaults,
        prepare=prepare_inputs,
    )
