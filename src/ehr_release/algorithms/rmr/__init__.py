"""RmR: the (k, k^m)-anonymity algorithm of Poulis et al. 2013, ArtUC's comparator.

"Anonymizing data with relational and transaction attributes" (ECML PKDD 2013): demographics
clustered under an NCP bound δ, clusters merged by demographic closeness (Rmerge_R), each
cluster's codes made k^m-anonymous by hierarchy-based Apriori Anonymization. Pure functions,
no I/O; the output is an ArtUC :class:`~ehr_release.algorithms.artuc.Anonymization`, written
by ArtUC's release writer and checked by the same independent verifier.
"""

from ehr_release.algorithms.rmr.apriori import hierarchy_kkm
from ehr_release.algorithms.rmr.rmr import CODE_MODELS, CodeModel, rmr
from ehr_release.algorithms.rmr.taxonomy import CodeAncestry

__all__ = ["CODE_MODELS", "CodeAncestry", "CodeModel", "hierarchy_kkm", "rmr"]
