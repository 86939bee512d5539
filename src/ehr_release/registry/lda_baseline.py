"""Registry glue for ``lda-baseline``: the thesis' Baseline comparator of LDA.

The same clustering and release as ``lda``, but two trajectories are aligned by index
(thesis Algorithm 2): the i-th pairs are generalized together and the longer trajectory's
tail is suppressed. It takes the same parameters and is verified by the same verifier; the
thesis reports it suppressing nearly everything for k > 2, which is why it is worth having
as a yardstick in comparisons.
"""

from __future__ import annotations

from ehr_release.registry.lda import make_entry

NAME = "lda-baseline"

ENTRY = make_entry(NAME, "LDA's Baseline: cluster longitudinal (ICD, age) trajectories, "
                   "aligning pairs by index and suppressing the longer trajectory's tail")
