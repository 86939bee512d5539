"""LDA: k-anonymity for longitudinal diagnosis data (trajectories of (ICD, age) pairs).

Records are clustered (MDAV-style) by the cost of aligning their trajectories — A-GS, a
dynamic program over generalization and suppression, or the index-wise Baseline — and
every member of a cluster publishes the cluster's representative, a trajectory of
generalized (ICD node, age block) pairs that embeds in order into each member's original.

See ``../shared/spec/03-repeated-longitudinal.md`` §2 and the thesis, chapter IV.
"""

from ehr_release.algorithms.lda.anonymize import LdaResult, anonymize_trajectories, make_model
from ehr_release.algorithms.lda.model import LossModel
from ehr_release.algorithms.lda.trees import AgeTree, CodeTree

__all__ = ["AgeTree", "CodeTree", "LdaResult", "LossModel", "anonymize_trajectories",
           "make_model"]
