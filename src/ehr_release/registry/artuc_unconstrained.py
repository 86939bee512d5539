"""Registry glue for ``artuc-unconstrained``: ArtUC's Algorithm 1 with no utility constraints.

Every record in one group, clusters merged by UL within δ, GenDiag free to set-generalize any
codes together. This was registered as ``rmr`` until issue 19, but it is not Poulis et al.'s
RmR (that is ``rmr`` now, :mod:`ehr_release.algorithms.rmr`): it is a relaxation of ArtUC's
own problem — the same heuristics with fewer restrictions — so it measures what the utility
constraints cost ArtUC, not how ArtUC compares with the earlier method. The configuration's
constraints are ignored by the algorithm and the verifier and only used by evaluation.
"""

from __future__ import annotations

from ehr_release.registry._artuc_variants import artuc_variant

NAME = "artuc-unconstrained"

ENTRY = artuc_variant(
    NAME, "ArtUC without utility constraints: clustering by NCP, merging by UL within δ, any "
    "codes set-generalized together (what the constraints cost ArtUC; not the paper's RmR)")
