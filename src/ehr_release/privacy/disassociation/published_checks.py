"""What a recipient can check without the original: the bytes' own rules, and the part of
VerPart's chunk order that published figures decide.

The replay of HorPart, VerPart and Refine (:mod:`.replay`) needs the original, which only
the site holds. A recipient or an outside auditor still holds the release, and with it:

* the layout (:func:`.parse.parse_release`) and the declared k and m;
* the subrecord order (:mod:`.order`), replayed exactly from the bytes;
* the order of the chunks of each cluster (and of each joint cluster's shared chunks), in
  part. VerPart ranks a cluster's codes held by ≥ k records — exactly its record-chunk codes,
  each with its support published as the number of subrecords holding it — by constraint
  and support (format, field ``chunk``). Pass n's first code is the best-ranked code left,
  never given back: so chunk n must hold the best-ranked code of chunks n, n+1, …; and a
  code of another constraint than that first code stays in chunk n only with every code of
  its constraint still left. A swapped chunk order, or a code of a second constraint split
  from its own, fails here. Which codes a pass *rejected* depends on co-occurrences across
  chunks that the release hides, so the rest of VerPart, HorPart and Refine are not
  checkable here — :func:`check_published` says so in what it returns.

The utility policy is needed for the ranks; a recipient rebuilds a hierarchy or similarity
policy from the release's codes (disassociation publishes every code), or reads the policy
file; a policy mined from the data (``frequent:``) cannot be rebuilt without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ehr_release.model.reports import Requirement, VerificationReport
from ehr_release.privacy.disassociation.evidence import MAX_EVIDENCE
from ehr_release.privacy.disassociation.parse import (
    NAME,
    RELEASE_FILE,
    ParsedRelease,
    ReleaseRejected,
    chunk_label,
    parse_release,
)

CHUNK_ORDER = "chunk order (from the bytes)"
#: The site's checks a recipient cannot run, and why.
NEEDS_ORIGINAL = {
    "choices replayed": "HorPart, VerPart and Refine replayed exactly (needs the original)",
    "structure, chunk k^m-anonymity, Guarantee 1, truthfulness":
        "counted against the original (needs it)",
}


def _rank(support: dict[int, int], constraint_of: list[int]) -> dict[int, int]:
    """Each code's place in VerPart's documented order (code ids order like names)."""
    groups: dict[object, list[int]] = {}
    for t in support:
        c = constraint_of[t]
        groups.setdefault(c if c >= 0 else ("alone", t), []).append(t)
    ranked = sorted((sorted(g, key=lambda t: (-support[t], t)) for g in groups.values()),
                    key=lambda g: (-support[g[0]], g[0]))
    return {t: i for i, t in enumerate(t for g in ranked for t in g)}


def _unit_problem(chunks: list[dict[int, int]], constraint_of: list[int]) -> int | None:
    """The first chunk (0-based) of one cluster's (or joint cluster's) chunks, given as code →
    support, that VerPart's order rules out; None if none does."""
    support = {t: n for chunk in chunks for t, n in chunk.items()}
    rank = _rank(support, constraint_of)
    for i, chunk in enumerate(chunks):
        left = [t for later in chunks[i:] for t in later]
        first = min(left, key=rank.__getitem__)
        if first not in chunk:
            return i
        own = constraint_of[first]
        for t in chunk:
            c = constraint_of[t]
            if c >= 0 and c != own and any(constraint_of[u] == c and u not in chunk
                                           for u in left):
                return i
    return None


def chunk_order_problems(rel: ParsedRelease, constraint_of: Mapping[str, int]) -> list[str]:
    """The chunks (as a report names them) that cannot be in VerPart's order."""
    lookup = [constraint_of.get(name, -1) for name in rel.code_names]
    n_codes = max(len(rel.code_names), 1)
    key = np.repeat(rel.sub_chunk * n_codes, np.diff(rel.sub_indptr)) + rel.sub_codes
    keys, counts = np.unique(key, return_counts=True)
    per_chunk: list[dict[int, int]] = [{} for _ in range(len(rel.chunk_owner))]
    for k, n in zip(keys.tolist(), counts.tolist(), strict=True):
        per_chunk[k // n_codes][k % n_codes] = n
    units: dict[tuple[bool, int], list[int]] = {}
    for g, (owner, shared) in enumerate(zip(rel.chunk_owner.tolist(),
                                            rel.chunk_shared.tolist(), strict=True)):
        units.setdefault((shared, owner), []).append(g)
    bad: list[str] = []
    for chunks in units.values():
        i = _unit_problem([per_chunk[g] for g in chunks], lookup)
        if i is not None:
            bad.append(chunk_label(rel, chunks[i]))
    return bad


def chunk_order_requirement(rel: ParsedRelease, constraint_of: Mapping[str, int]
                            ) -> Requirement:
    bad = chunk_order_problems(rel, constraint_of)
    return Requirement(
        CHUNK_ORDER, "each chunk holds the best-ranked code of it and the chunks after it, "
        "and a code of a second constraint only with all of that constraint's codes left "
        "(VerPart's order, from the published supports; needs no original)",
        f"{len(rel.chunk_owner):,} chunks; " + (
            "consistent with VerPart's order" if not bad else
            f"{len(bad)} group(s) out of order, e.g. {bad[0]}"),
        not bad, {"chunks": bad[:MAX_EVIDENCE]})


@dataclass(frozen=True)
class PublishedVerdict:
    """A recipient's verdict: the checks it ran (``report``) and those it could not."""

    report: VerificationReport
    not_run: dict[str, str]


def check_published(files: dict[str, bytes], k: int, m: int,
                    constraint_of: Mapping[str, int] | None) -> PublishedVerdict:
    """Every check the release alone allows (module doc); ``constraint_of`` None (a policy
    mined from the data) leaves the chunk order out, and ``not_run`` says so."""
    from ehr_release.privacy.disassociation.verdict import order_requirement

    not_run = dict(NEEDS_ORIGINAL)
    try:
        rel = parse_release(files)
    except ReleaseRejected as exc:
        failed = Requirement("release format", f"{RELEASE_FILE} in the published layout",
                             str(exc), False)
        return PublishedVerdict(VerificationReport(NAME, [failed]), not_run)
    reqs = [Requirement("release format", f"{RELEASE_FILE} declaring k = {k}, m = {m}",
                        f"declares k = {rel.k}, m = {rel.m}", rel.k == k and rel.m == m),
            order_requirement(rel)]
    if constraint_of is None:
        not_run[CHUNK_ORDER] = "needs the utility policy, which is mined from the original"
    else:
        reqs.append(chunk_order_requirement(rel, constraint_of))
    return PublishedVerdict(VerificationReport(NAME, reqs), not_run)


def recipient_verdict(files: dict[str, bytes], params: Mapping[str, object]
                      ) -> PublishedVerdict:
    """:func:`check_published` under the release's declared parameters, for ``verify``
    without the original (a recipient, an outside auditor).

    The policy's constraints are rebuilt from the published codes when the policy names a
    hierarchy or a code similarity (disassociation publishes every code it keeps); a policy
    file is read; a policy mined from the data (``frequent:``) cannot be rebuilt, and the
    chunk-order check is then listed as not run.
    """
    from ehr_release.configuration.policies import parse_policy_spec, resolve_policy
    from ehr_release.core.errors import EhrReleaseError
    from ehr_release.ingest.rules import detect_code_system
    from ehr_release.model.dataset import Dataset

    k, m = int(str(params["k"])), int(str(params["m"]))
    spec = str(params.get("policy") or "")
    constraint_of: Mapping[str, int] | None = None
    if spec and parse_policy_spec(spec).kind != "frequent":
        try:
            codes = sorted(parse_release(files).code_names)
        except ReleaseRejected:
            codes = []
        if codes:
            try:
                system = detect_code_system(codes)
                if not isinstance(system, str):  # a mix: no one hierarchy to rebuild from
                    return check_published(files, k, m, None)
                published = Dataset.from_records([codes], code_system=system)
                constraint_of = resolve_policy(spec, published).constraint_of()
            except EhrReleaseError:
                constraint_of = None  # not rebuildable: check_published says it did not run
    return check_published(files, k, m, constraint_of)
