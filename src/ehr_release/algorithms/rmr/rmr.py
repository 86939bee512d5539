"""RmR (Poulis et al. 2013) on an RT-dataset: relational clustering, Rmerge_R, then AA.

Poulis, Loukides, Gkoulalas-Divanis & Skiadopoulos, "Anonymizing data with relational and
transaction attributes", ECML PKDD 2013 (the ArtUC paper's [61]; its §2.1 and §5) give a
framework with three phases. This module instantiates it as the ArtUC paper describes RmR —
"generalizes demographic attributes so the incurred information loss remains lower than a
given threshold and performs set-valued generalization to diagnosis codes", with no utility
constraints — and as we read the 2013 paper where the ArtUC paper says nothing:

1. **relational phase**: a k-anonymity clustering of the demographics by NCP. The greedy
   k-member clustering of ArtUC's phase 2 (itself "inspired by [61]") is reused on one group
   of all records; if NCP(D̃) > δ already, nothing is produced (as ArtUC's Step 16);
2. **merging phase**: clusters with identical demographics are joined, then Rmerge_R
   (:mod:`~ehr_release.algorithms.rmr.merging`) merges by NCP under δ;
3. **transaction phase**: each cluster's codes are made k^m-anonymous by Apriori
   Anonymization with full-subtree cuts of the code hierarchy
   (:mod:`~ehr_release.algorithms.rmr.apriori`). Why hierarchy-based although the ArtUC
   paper writes "set-valued generalization": its Fig. 1c prints RmR's output on the
   running example, and its three clusters' codes — e.g. ``(493.2, 494.1) (053.20, 053.71)``
   for {2, 3}, the codes of section 490–496 and of 053 — are exactly what these cuts give
   (``tests/test_rmr.py``), while set-based GenDiag gives other sets for {2, 3} and
   {0, 1, 4, 5}. ``codes="set"`` runs the literal reading instead (GenDiag, no code sets).

Not done: code-set weights w(ũ) (ArtUC's ``code_weights``) are not used; every code weighs 1.

What separates it from ``artuc-unconstrained`` (ArtUC with an empty constraint set): RmR
chooses merges by demographic closeness, not by the codes' UL, and generalizes codes only
along the hierarchy (a generalized code is a subtree's codes), not as any set. Both are
choices of the 2013 framework; neither knows the utility constraints.

A run that cannot meet δ or ε raises :class:`~ehr_release.core.errors.ParameterError`, like
ArtUC. The result is an :class:`~ehr_release.algorithms.artuc.Anonymization`, published by
ArtUC's own writer, so the same verifier, format check and attack audit apply.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ehr_release.algorithms.artuc import Anonymization
from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.formation import form_clusters
from ehr_release.algorithms.artuc.gendiag import CodeGeneralization, gendiag
from ehr_release.algorithms.artuc.merging import merge_identical
from ehr_release.algorithms.artuc.space import DemographicSpace
from ehr_release.algorithms.rmr.apriori import hierarchy_kkm
from ehr_release.algorithms.rmr.merging import merge_by_ncp
from ehr_release.algorithms.rmr.taxonomy import CodeAncestry
from ehr_release.configuration.constraints import RTConfig, RTData
from ehr_release.core.errors import ParameterError
from ehr_release.model.hierarchy import Hierarchy

NAME = "rmr"
#: The transaction phase's generalization model (see :func:`rmr`).
CodeModel = Literal["hierarchy", "set"]
CODE_MODELS: tuple[CodeModel, ...] = ("hierarchy", "set")


def rmr(data: RTData, config: RTConfig, code_hierarchy: Hierarchy, *, k: int, m: int,
        delta: float, epsilon: float, rng: np.random.Generator,
        codes: CodeModel = "hierarchy") -> Anonymization:
    """(k, k^m)-anonymize ``data`` with NCP(D̃) ≤ δ and at most ε codes suppressed.

    ``config`` supplies the released attributes, their hierarchies and domains; its utility
    constraints are not read. ``code_hierarchy`` is the code taxonomy the codes climb.
    ``codes`` picks the transaction phase: ``"hierarchy"`` (AA with full-subtree cuts) or
    ``"set"`` (set-based: GenDiag with no code sets, the ArtUC paper's "set-valued
    generalization" read literally).
    """
    space = DemographicSpace(config, data)
    table = CodeTable.build(data.codes)
    if codes == "set":
        def transaction(rows: np.ndarray) -> CodeGeneralization:
            return gendiag(table, rows, k=k, m=m)
    else:
        ancestry = CodeAncestry.build(table.names, code_hierarchy)

        def transaction(rows: np.ndarray) -> CodeGeneralization:
            return hierarchy_kkm(table, ancestry, rows, k, m)
    formed = form_clusters(space, np.zeros(len(data.patient_ids), dtype=np.int64), k, rng)
    clustered = sum(c.size for c in formed.clusters)
    ncp = sum(c.size * space.ncp(c.box) for c in formed.clusters) / max(clustered, 1)
    if ncp > delta + 1e-12:
        raise ParameterError("delta", f"is below the NCP {ncp:.4f} of the k-anonymous "
                             "clustering; raise δ or lower k", delta)
    clusters, gens = merge_by_ncp(space, merge_identical(formed.clusters), delta, transaction)
    total = sum(g.suppressed for g in gens)
    if total > epsilon:
        raise ParameterError("epsilon", f"is below the {total} codes RmR had to suppress "
                             "(clusters where fewer than k records hold a code); raise ε",
                             epsilon)
    return Anonymization(NAME, space, table, clusters, gens, formed.suppressed_rows,
                         formed.picks)
