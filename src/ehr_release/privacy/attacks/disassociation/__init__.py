"""The k^m adversary against a disassociated release (``release.parquet``).

The attacker knows up to m codes S of a target and holds the whole release. Inside a cluster
P, the target's record is one of the subrecords of each chunk that hold the codes of S in
that chunk's domain, and (with codes of S only in the item chunk) one of the |P| records: the
attacker's candidate set is the smallest of these, ``cand_P(S) = min(|P|, sup_C(S ∩ T_C)
over every record or shared chunk C meeting S)``, and 0 when S does not fit P's domain or a
chunk never shows S ∩ T_C together.

What the attack assumes beyond the model, to use every published field:

* **The attacker knows the target's cluster.** Cluster ids, the order of clusters and of
  chunks, joint-cluster membership are the same for every record of a cluster; whatever they
  leak, it is at most the cluster. So the candidate set of S is the smallest positive
  ``cand_P(S)`` over the clusters S fits (not the sum over clusters, which the model's
  Guarantee 1 uses), and 0 if S fits none (the release does not hold the patient).
* **Positions may link chunks.** If subrecords at the same position of a cluster's chunks
  came from one record, the attacker reads records positionally and the candidate set of S
  is the number of positions of P holding S. The attack tests that reading with the
  original: under it, every position joining several chunks is an original record (plus
  item-chunk codes); no pair of codes shares more positions of a group than original records
  hold it; and each pair of codes meeting across chunks does so at exactly as many positions
  as original records hold it outside one subrecord, give or take the records where one of
  the two sits in an item chunk. A release whose order breaks none of these, while
  independent reshuffles of its chunks break them in ≥ :data:`EXPECTED_REFUTATIONS` groups
  on average, is read positionally: groups are shuffled independently, so independent
  shuffles would pass by luck with probability about e^-14 < 10^-6. Where the data give the
  test too little to go on (few groups with several chunks, codes that combine freely), the
  order is treated as independent shuffles and the report says how weak the evidence was.
* **Anything undeclared can single a record out.** An undeclared column, file metadata or
  column statistics, rows out of the declared order, a per-group value that differs between
  the group's rows, or a subrecord / item chunk whose codes are not in canonical (sorted,
  distinct) order can carry a per-record value the attacker cannot interpret: the attack
  assumes the worst (candidate set 1).

Knowledge sets: for m ≤ 2 every patient × every set of ≤ m of its codes (evaluated once per
distinct set, vectorized); for m > 2 the same when there are at most
:data:`~ehr_release.privacy.attacks.EXHAUSTIVE_LIMIT`, otherwise a seeded sample of
:data:`~ehr_release.privacy.attacks.MIN_SAMPLED` plus every set built only from rare codes.
Nothing in the report names a patient, a code or a cluster: counts only.

The package, one job a module: :mod:`.release` reads the file (strictly), :mod:`.original`
the extract, :mod:`.positions` lays subrecords out as a positional reading would,
:mod:`.order_test` decides whether that reading holds, :mod:`.candidates` computes the
candidate sets, :mod:`.knowledge` picks the knowledge sets for m > 2, :mod:`.report` words
the result; :mod:`.arrays` holds the sorted-key helpers they share. :func:`attack` ties them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ehr_release.model.dataset import Dataset
from ehr_release.model.reports import AttackReport, candidate_set_distribution
from ehr_release.privacy.attacks.disassociation.arrays import distinct, lookup
from ehr_release.privacy.attacks.disassociation.candidates import (
    ByCluster,
    build_domain,
    positional_candidates,
    unlinked_candidates,
)
from ehr_release.privacy.attacks.disassociation.knowledge import knowledge_sets
from ehr_release.privacy.attacks.disassociation.order_test import positional_test
from ehr_release.privacy.attacks.disassociation.original import original_records, original_tables
from ehr_release.privacy.attacks.disassociation.release import (
    RELEASE_FILE,
    Unbounded,
    Unreadable,
    read_release,
)
from ehr_release.privacy.attacks.disassociation.report import order_words, report_of


def attack(files: dict[str, bytes], original: Dataset, params: dict[str, Any]) -> AttackReport:
    """The k^m adversary on a disassociated release (see the module docstring)."""
    k, m = int(params["k"]), int(params["m"])
    names, orig_indptr, orig_local = original_records(original)
    try:
        r = read_release(files.get(RELEASE_FILE, b""), names)
    except Unreadable as exc:
        return report_of(m, k, 0, False, None, f"the release cannot be read: {exc}")
    except Unbounded as exc:
        return report_of(m, k, 0, False, 1, f"{exc}: it can carry a per-record value, so the "
                       "attacker is assumed to single a record out (candidate set 1)")
    c = r.n_codes
    index = {name: i for i, name in enumerate(r.names)}
    remap = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
    orig_codes = remap[orig_local] if len(orig_local) else orig_local
    o = original_tables(orig_indptr, orig_codes, c)
    d = build_domain(r)
    test = positional_test(r, d, o)
    if m <= 2:
        k1, v1, k2, v2 = (positional_candidates(r, m) if test.positional
                          else unlinked_candidates(r, d, m))
        singles = distinct(orig_codes, c)
        found = [lookup(k1, v1, singles)]
        if m >= 2:
            found.append(lookup(k2, v2, o.pair_keys))
        values = np.concatenate(found)
        lengths = np.diff(orig_indptr)
        tried = int(lengths.sum() + (lengths * (lengths - 1) // 2).sum() if m >= 2
                    else lengths.sum())
        exhaustive = True
    else:
        bounds, flat = orig_indptr.tolist(), orig_codes.tolist()
        records = [flat[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
        support = np.bincount(orig_codes, minlength=c)
        rare = set(np.flatnonzero((support > 0) & (support < k)).tolist())
        sets, tried, exhaustive = knowledge_sets(records, m, rare)
        by = ByCluster(r, d, test.positional)
        values = np.array([by.candidates(s, test.positional) for s in sorted(sets)],
                          dtype=np.int64)
    smallest = int(values.min()) if len(values) else None
    below = int((values < k).sum()) if len(values) else 0
    kind = "every one" if exhaustive else "seeded sample plus every rare-code set"
    measured = (f"smallest candidate set {smallest:,} over {tried:,} knowledge sets ({kind}; "
                f"{len(values):,} distinct, {below:,} below k); {order_words(test)}"
                if smallest is not None else "no patient holds a code: nothing to attack")
    if smallest == 0:
        measured += ("; 0: some patient's codes fit no cluster, so the release does not hold "
                     "that patient as published")
    report = replace(report_of(m, k, tried, exhaustive, smallest, measured),
                     candidate_set_sizes=candidate_set_distribution(values))
    if smallest is None:
        return replace(report, passed=True)
    return report
