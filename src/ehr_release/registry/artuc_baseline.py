"""Registry glue for ``artuc-baseline``: the paper's Baseline comparator of ArtUC.

Each constraint group is published with its constraint's values as demographics (pre-
generalization, like Takahashi et al.) and GenDiag makes its codes k^m-anonymous (ArtUC paper
§5). It takes the same parameters as ``artuc``; δ does not bound Baseline itself (its NCP is
whatever the constraints dictate) and is used only when evaluation runs the comparators.
"""

from __future__ import annotations

from ehr_release.registry._artuc_variants import artuc_variant

NAME = "artuc-baseline"

ENTRY = artuc_variant(
    NAME, "ArtUC's Baseline: demographics replaced by their utility constraint's values, "
    "codes made k^m-anonymous per constraint group")
