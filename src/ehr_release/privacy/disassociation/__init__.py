"""Independent verifier of a disassociated release (``release.parquet``) against the original.

It shares no code with ``ehr_release.algorithms``: it parses the published bytes itself and
re-derives every figure from them and from the original dataset (spec, "Verifying").

Requirements checked
--------------------
1. *format* — the table has the declared layout (columns, types, labels, row order, no
   metadata) and declares the requested k and m.
2. *structure* — every cluster has ≥ k records and together they hold |D| records; every
   record chunk lists ``size`` subrecords and every shared chunk one per record of its joint
   cluster; inside a cluster the record-chunk domains, the item chunk and the shared domains
   are pairwise disjoint; a joint cluster has ≥ 2 member clusters and declares their total
   size (a cluster names at most one joint cluster: the layout has one value per cluster).
3. *chunk k^m-anonymity* — in every record and shared chunk, each itemset of ≤ m codes that
   occurs is held by ≥ k subrecords.
4. *Guarantee 1* — for every itemset S of ≤ m codes of an original record, the largest number
   of records of some reconstruction that contain S (``cap(S)``, below) is ≥ k.
5. *truthfulness* — the release is consistent with the original: every published count is
   at most the original one, and every original count is at most ``cap``. The release does
   not say which patient went to which cluster (publishing it would help the attacker), so
   losslessness is checked through these count bounds on all itemsets of ≤ m codes.
6. *subrecord order* — every chunk's subrecords in the documented content-hash order
   (:mod:`.order`; needs no original).
7. *choices replayed* — the clusters and their order (HorPart), each cluster's record chunks
   and their order (VerPart) and the joint clusters with their shared chunks (Refine) are
   exactly what the documented rules make of the original (:mod:`.replay`; run whenever
   the run's policy is known, as :func:`verify` always knows it). A recipient without the
   original runs :func:`.published_checks.check_published` instead, which says which checks
   it could not run.

``cap(S)`` sums over clusters P: 0 if S is not inside P's domain, |P| if S lies in the item
chunk, otherwise the smallest support of S ∩ Ti over the record chunks Ci meeting S. A joint
cluster J with shared codes Ts meeting S gives ``min(sup_shared(S ∩ Ts), Σ_P cap_P(S \\ Ts))``
instead of its members' terms. For m ≤ 2 the sums are computed with sparse matrix products
and array joins; for larger m by a direct (slower) enumeration, which the tests also use to

Modules: :mod:`.parse` (the published shape), :mod:`.tables` (release and original as
arrays), :mod:`.structure` (requirement 2), :mod:`.counts` and :mod:`.caps` (supports and
``cap``), :mod:`.findings` (the figures of requirements 3–5), :mod:`.verdict` (the
verdict: :func:`check_km`, and :func:`verify`, the entry point every family shares);
:mod:`.order` (requirement 6), :mod:`.replay` with :mod:`.replay_horpart`,
:mod:`.replay_verpart` and :mod:`.replay_refine` (requirement 7), :mod:`.published_checks`
(a recipient's checks); :mod:`.arrays` and :mod:`.evidence` are their helpers. The names
below are the package's public interface.
"""

from __future__ import annotations

from ehr_release.privacy.disassociation.caps import caps_general, caps_small
from ehr_release.privacy.disassociation.counts import (
    chunk_counts_general,
    chunk_counts_small,
    original_counts_general,
    original_counts_small,
)
from ehr_release.privacy.disassociation.evidence import MAX_EVIDENCE
from ehr_release.privacy.disassociation.findings import Findings, analyse, analyse_tables
from ehr_release.privacy.disassociation.parse import (
    NAME,
    RELEASE_FILE,
    ParsedRelease,
    ReleaseRejected,
    parse_release,
)
from ehr_release.privacy.disassociation.structure import domain_problems, shape_problems
from ehr_release.privacy.disassociation.tables import Tables, build_tables
from ehr_release.privacy.disassociation.verdict import check_km, verify

__all__ = [
    "MAX_EVIDENCE", "NAME", "RELEASE_FILE", "Findings", "ParsedRelease", "ReleaseRejected",
    "Tables", "analyse", "analyse_tables", "build_tables", "caps_general", "caps_small",
    "chunk_counts_general", "chunk_counts_small", "domain_problems", "original_counts_general",
    "original_counts_small", "parse_release", "shape_problems", "check_km", "verify",
]
