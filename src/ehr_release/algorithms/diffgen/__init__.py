"""DiffGen: ε-differentially private release of relational + set-valued data by
generalization (Mohammed, Jiang, Chen, Fung & Ohno-Machado, JAMIA 2013).

Pure functions over numpy/pandas: :func:`encode_dataset` checks a dataset against the
public configuration, :func:`run_diffgen` runs Algorithm 1 with an ε ledger, and
:mod:`.release` turns the result into the published files. No I/O, no Prefect.
"""

from ehr_release.algorithms.diffgen.core import (
    COUNT_COLUMN,
    UNUSED_POLICIES,
    DiffGenParams,
    DiffGenResult,
    emptiness_threshold,
    epsilon_prime,
    run_diffgen,
)
from ehr_release.algorithms.diffgen.encode import Encoded, encode_dataset
from ehr_release.algorithms.diffgen.ledger import BudgetExceeded, Ledger
from ehr_release.algorithms.diffgen.noise import NoiseSource, OpenDPNoise, noise_source

__all__ = [
    "COUNT_COLUMN",
    "UNUSED_POLICIES",
    "BudgetExceeded",
    "DiffGenParams",
    "DiffGenResult",
    "Encoded",
    "Ledger",
    "NoiseSource",
    "OpenDPNoise",
    "emptiness_threshold",
    "encode_dataset",
    "epsilon_prime",
    "noise_source",
    "run_diffgen",
]
