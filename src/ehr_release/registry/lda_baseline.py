"""Registry glue for ``lda-baseline``: the thesis' Baseline comparator of LDA.

The same clustering and release as ``lda``, but two trajectories are aligned by index
(thesis Algorithm 2): the i-th pairs are generalized together and the longer trajectory's
tail is suppressed. It takes the same parameters and is verified by the same verifier; the
thesis reports it suppressing nearly everything for k > 2, which is why it is worth having
as a yardstick in comparisons.
"""

from __future__ import annotations

from ehr_release.algorithms.lda.release import RECORDS_FILE
from ehr_release.registry.lda import PARAMS, PRIVACY_MODEL, LdaEntry, anonymize, evaluate, verify

NAME = "lda-baseline"

ENTRY = LdaEntry(
    name=NAME,
    summary="LDA's Baseline: cluster longitudinal (ICD, age) trajectories, aligning pairs by "
            "index and suppressing the longer trajectory's tail",
    privacy_model=PRIVACY_MODEL,
    params=PARAMS,
    anonymize=lambda ds, params, rng: anonymize(NAME, ds, params),
    verify=lambda files, original, params: verify(NAME, files, original, params),
    evaluate=lambda files, original, params, rng: evaluate(NAME, files, original, params),
    headline_loss="AvgRE",
    id_file=RECORDS_FILE,
)
