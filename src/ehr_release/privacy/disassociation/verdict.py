"""The verdict: every requirement checked in turn, failing closed on a malformed release."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ehr_release.model.dataset import Dataset
from ehr_release.model.mapping import MapFn
from ehr_release.model.reports import Requirement, VerificationReport
from ehr_release.privacy.disassociation.evidence import MAX_EVIDENCE, braces
from ehr_release.privacy.disassociation.findings import analyse_tables
from ehr_release.privacy.disassociation.order import misordered_chunks
from ehr_release.privacy.disassociation.parse import (
    NAME,
    RELEASE_FILE,
    ParsedRelease,
    ReleaseRejected,
    parse_release,
)
from ehr_release.privacy.disassociation.replay import NAME as REPLAYED
from ehr_release.privacy.disassociation.replay import Choices, choices_requirement
from ehr_release.privacy.disassociation.structure import domain_problems, shape_problems
from ehr_release.privacy.disassociation.tables import build_tables


def check_km(files: dict[str, bytes], original: Dataset, k: int, m: int,
             *, general: bool | None = None, map_fn: MapFn | None = None,
             choices: Choices | None = None) -> VerificationReport:
    """Check a release against the original for the requested k and m (fails closed).

    ``map_fn`` may run the itemset counting of m > 2 partition by partition elsewhere
    (see :mod:`ehr_release.privacy.itemset_counts`); the verdict does not depend on it.
    ``choices`` (the run's policy and maxClusterSize) adds requirement 7, the exact replay
    of HorPart, VerPart and Refine (:mod:`.replay`); :func:`verify`, the entry point of
    every verification, always passes it. Without it the report has no such requirement.
    """
    reqs: list[Requirement] = []
    later = (ORDER, REPLAYED) if choices is not None else (ORDER,)
    not_checked = "not checked: the release is not well formed"
    try:
        rel = parse_release(files)
        problems = shape_problems(rel, original.n_patients, k)
        tables = None if problems else build_tables(rel, original)
    except ReleaseRejected as exc:
        reqs.append(Requirement("release format", f"{RELEASE_FILE} in the published layout",
                                str(exc), False))
        for name in ("structure", "chunk k^m-anonymity", "Guarantee 1", "truthfulness",
                     *later):
            reqs.append(Requirement(name, "see release format", not_checked, False))
        return VerificationReport(NAME, reqs)
    declared = rel.k == k and rel.m == m
    reqs.append(Requirement("release format", f"{RELEASE_FILE} declaring k = {k}, m = {m}",
                            f"declares k = {rel.k}, m = {rel.m}", declared,
                            {"declared_k": rel.k, "declared_m": rel.m}))
    if tables is not None:
        problems = domain_problems(rel, tables)
    n_sub = int((~rel.chunk_shared[rel.sub_chunk]).sum())      # in record chunks
    reqs.append(Requirement(
        "structure", f"clusters of ≥ {k} records partition the {original.n_patients:,} records; "
        "chunk sizes and disjoint chunk domains",
        f"{rel.n_clusters:,} clusters, {rel.n_joints:,} joint clusters, "
        f"{n_sub:,} subrecords" + (f"; {len(problems)} problem(s): {problems[0]}"
                                   if problems else ""),
        not problems, {"problems": problems[:MAX_EVIDENCE]}))
    if problems or tables is None:
        for name in ("chunk k^m-anonymity", "Guarantee 1", "truthfulness"):
            reqs.append(Requirement(name, "see structure", not_checked, False))
        reqs.append(order_requirement(rel))
        if choices is not None:
            reqs.append(Requirement(REPLAYED, "see structure", not_checked, False))
        return VerificationReport(NAME, reqs)
    f = analyse_tables(tables, m, general=general, map_fn=map_fn)
    chunk_ok = f.weakest_chunk_support is None or f.weakest_chunk_support >= k
    g1_ok = f.weakest_cap is None or f.weakest_cap >= k
    # Itemsets (codes) are named only where a requirement failed, for the terminal; stored
    # copies drop them (reports.Requirement.stored). One that held is counts only.
    chunk_where = "" if chunk_ok else (f" ({braces(f.weakest_chunk_itemset)} in "
                                       f"{f.weakest_chunk})")
    weakest = "" if g1_ok else f" {braces(f.weakest_itemset)}"
    reqs.append(Requirement(
        "chunk k^m-anonymity", f"every ≤{m}-itemset in a record or shared chunk held by ≥ {k} "
        "subrecords",
        "no chunk itemsets" if f.weakest_chunk is None else
        f"smallest support {f.weakest_chunk_support}{chunk_where}", chunk_ok,
        {"itemset": list(f.weakest_chunk_itemset or ()), "support": f.weakest_chunk_support,
         "chunk": f.weakest_chunk}))
    reqs.append(Requirement(
        "Guarantee 1", f"every ≤{m}-itemset of an original record can be held by ≥ {k} "
        "records of a reconstruction",
        f"{f.itemsets_checked:,} itemsets; weakest{weakest} can be held by at most "
        f"{f.weakest_cap} records" if f.weakest_itemset else "no itemsets",
        g1_ok, {"itemset": list(f.weakest_itemset or ()), "support": f.weakest_cap,
                "itemsets": f.itemsets_checked}))
    reqs.append(Requirement(
        "truthfulness", "published counts ≤ original counts ≤ reconstructible maximum",
        "consistent with the original" if not f.untruthful else
        f"{len(f.untruthful)}+ inconsistencies, e.g. {f.untruthful[0]}",
        not f.untruthful, {"inconsistencies": f.untruthful}))
    reqs.append(order_requirement(rel))
    if choices is not None:
        reqs.append(choices_requirement(rel, tables, k, m, choices))
    return VerificationReport(NAME, reqs)


#: The requirement that replays the one free choice of the model (issue 32).
ORDER = "subrecord order"


def order_requirement(rel: ParsedRelease) -> Requirement:
    """Every chunk in the documented subrecord order, replayed exactly from the bytes (no key
    and no original needed, so a recipient's check is the site's; see :mod:`.order`)."""
    bad = misordered_chunks(rel)
    return Requirement(
        ORDER, "every chunk's subrecords in the documented order (exact replay of the "
        "format's rule from the published bytes; needs no key)",
        f"{len(rel.chunk_owner):,} chunks replayed; " + (
            "all in order" if not bad else f"{len(bad)} not in the documented order, e.g. "
                                           f"{bad[0]}"),
        not bad, {"chunks": bad[:MAX_EVIDENCE]})


def verify(files: dict[str, bytes], original: Dataset, params: Mapping[str, Any], *,
           map_fn: MapFn | None = None) -> VerificationReport:
    """The entry point every family shares: k^m-anonymity of ``files`` for the run's k and
    m, and the replay of the run's choices under its policy and maxClusterSize (see
    :func:`check_km`; ``map_fn`` only decides where the counting runs)."""
    from ehr_release.configuration.policies import resolve_policy

    size = params.get("max_cluster_size")
    choices = Choices(resolve_policy(str(params["policy"]), original).constraint_of(),
                      None if size is None else int(size))
    return check_km(files, original, int(params["k"]), int(params["m"]), map_fn=map_fn,
                    choices=choices)
