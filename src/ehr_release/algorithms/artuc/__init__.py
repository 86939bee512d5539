"""ArtUC: (k, k^m)-anonymity for demographics + diagnosis codes under utility constraints.

Pure functions over an :class:`~ehr_release.configuration.constraints.RTData` and its
:class:`~ehr_release.configuration.constraints.RTConfig`; no file I/O, no Prefect. The verifier in
``privacy/kkm.py`` re-checks the result from the published bytes alone.
"""

from ehr_release.algorithms.artuc.artuc import (
    Anonymization,
    Relaxation,
    Relaxing,
    artuc,
    artuc_unconstrained,
    baseline,
)
from ehr_release.algorithms.artuc.release import CODES_FILE, RECORDS_FILE, release_files

__all__ = ["CODES_FILE", "RECORDS_FILE", "Anonymization", "Relaxation", "Relaxing", "artuc",
           "baseline",
           "release_files", "artuc_unconstrained"]
