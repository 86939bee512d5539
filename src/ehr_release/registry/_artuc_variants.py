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
    PRIVACY_MODEL,
    attack,
    config_defaults,
    evaluate,
    prepare_inputs,
    run,
    verifier,
)

if TYPE_CHECKING:  # annotations only: parameters are checked before pandas loads
    import numpy as np

    from ehr_release.model.dataset import Dataset



def artuc_variant(name: str, summary: str) -> AlgorithmEntry:
    """The entry for ``name``; what its verifier checks (NCP ≤ δ, the utility constraints)
    is decided by :func:`ehr_release.privacy.kkm.verify` from the name."""

    def anonymize(dataset: Dataset, params: dict[str, Any],
                  rng: np.random.Generator) -> ReleaseFiles:
        return run(name, dataset, params, rng)

    return AlgorithmEntry(
        name=name,
        summary=summary,
        privacy_model=PRIVACY_MODEL,
        params=PARAMS,
        anonymize=anonymize,
        verify=verifier(name),
        evaluate=lambda files, original, params, rng: evaluate(name, files, original, params,
                                                               rng),
        headline_loss="ARE W3",
        schema=SCHEMA,
        attack=attack,
        count_records=count_records,
        defaults_from=config_defaults,
        prepare=prepare_inputs,
    )
