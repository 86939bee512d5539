"""Disassociation: k^m-anonymity for diagnosis codes without generalization or suppression.

Loukides, Liagouris, Gkoulalas-Divanis, Terrovitis (J. Biomed. Inform. 2014); spec
``01-disassociation.md``. Records are grouped into clusters of similar records (HorPart);
inside each cluster the codes are split into chunks whose subrecords are published in random
order, so rare combinations are broken apart while every code stays published (VerPart);
codes rare in several neighbouring clusters are then shared across them (Refine).

Pure functions on in-memory data: no file I/O and no Prefect here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ehr_release.algorithms.disassociation.core import (
    DisassociationResult,
    MapBatches,
    check_parameters,
    disassociate,
)
from ehr_release.algorithms.disassociation.encoding import (
    EncodedRecords,
    encode_code_sets,
    encode_dataset,
)
from ehr_release.algorithms.disassociation.model import (
    RELEASE_FILE,
    DisassociatedRelease,
    PublishedCluster,
    PublishedJointCluster,
)
from ehr_release.algorithms.disassociation.reconstruct import (
    reconstruct,
    reconstruct_dataset,
)
from ehr_release.configuration.policies import UtilityPolicy
from ehr_release.model.dataset import Dataset


def disassociate_dataset(dataset: Dataset, k: int, m: int, policy: UtilityPolicy,
                         rng: np.random.Generator, **options: Any) -> DisassociationResult:
    """Disassociate a :class:`Dataset` under a utility policy (see :func:`disassociate`)."""
    enc = encode_dataset(dataset)
    return disassociate(enc, k, m, enc.constraint_ids(policy.constraint_of()), rng, **options)


__all__ = [
    "RELEASE_FILE",
    "DisassociatedRelease",
    "DisassociationResult",
    "EncodedRecords",
    "MapBatches",
    "PublishedCluster",
    "PublishedJointCluster",
    "check_parameters",
    "disassociate",
    "disassociate_dataset",
    "encode_code_sets",
    "encode_dataset",
    "reconstruct",
    "reconstruct_dataset",
]
