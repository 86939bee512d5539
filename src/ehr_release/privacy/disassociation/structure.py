"""Requirement 2, structure: sizes, chunk lengths, joint clusters and disjoint domains."""

from __future__ import annotations

import numpy as np

from ehr_release.privacy.disassociation.evidence import MAX_EVIDENCE
from ehr_release.privacy.disassociation.parse import ParsedRelease
from ehr_release.privacy.disassociation.tables import Tables


def shape_problems(rel: ParsedRelease, n_original: int, k: int) -> list[str]:
    """Sizes, chunk lengths and joint-cluster membership (everything but code domains)."""
    problems: list[str] = []
    ids = [c.id for c in rel.clusters]
    if len(set(ids)) != len(ids):
        problems.append("cluster ids are not unique")
    size_of = {c.id: c.size for c in rel.clusters}
    total = sum(c.size for c in rel.clusters)
    if total != n_original:
        problems.append(f"clusters hold {total:,} records, the original has {n_original:,}")
    for c in rel.clusters:
        if c.size < k:
            problems.append(f"cluster {c.id} has {c.size} records (< k = {k})")
        for i, chunk in enumerate(c.chunks):
            if len(chunk) != c.size:
                problems.append(f"cluster {c.id} record chunk {i + 1} lists {len(chunk)} "
                                f"subrecords, expected {c.size}")
    joint_of: dict[str, int] = {}
    for n, j in enumerate(rel.joints):
        missing = [x for x in j.members if x not in size_of]
        if missing:
            problems.append(f"joint cluster {n + 1} names unknown cluster {missing[0]}")
            continue
        if len(set(j.members)) != len(j.members) or len(j.members) < 2:
            problems.append(f"joint cluster {n + 1} must name ≥ 2 distinct clusters")
        for x in j.members:
            if x in joint_of:
                problems.append(f"cluster {x} is in joint clusters {joint_of[x] + 1} and {n + 1}")
            joint_of[x] = n
        size = sum(size_of[x] for x in j.members)
        for i, chunk in enumerate(j.chunks):
            if len(chunk) != size:
                problems.append(f"joint cluster {n + 1} shared chunk {i + 1} lists {len(chunk)} "
                                f"subrecords, expected {size}")
    return problems


def domain_problems(rel: ParsedRelease, t: Tables) -> list[str]:
    """Codes published in two places of one cluster (chunks, item chunk, shared chunks)."""
    c = len(t.codes)
    # each shared code counts as a place of every member cluster of its joint cluster
    in_joint = np.flatnonzero(t.joint_of_cluster >= 0)
    by_joint = in_joint[np.argsort(t.joint_of_cluster[in_joint], kind="stable")]
    counts = np.bincount(t.joint_of_cluster[in_joint], minlength=len(rel.joints))
    starts = np.cumsum(counts) - counts
    rep = counts[t.sh_joint]
    offsets = np.arange(int(rep.sum())) - np.repeat(np.cumsum(rep) - rep, rep)
    sh_cluster = by_joint[np.repeat(starts[t.sh_joint], rep) + offsets]
    cluster = np.concatenate([t.dom_cluster, sh_cluster])
    code = np.concatenate([t.dom_code, np.repeat(t.sh_code, rep)])
    place = np.concatenate([t.dom_chunk, np.repeat(t.sh_chunk, rep)])
    order = np.lexsort((place, code, cluster))
    cluster, code, place = cluster[order], code[order], place[order]
    key = cluster * c + code
    problems = []
    for i in np.flatnonzero(key[1:] == key[:-1])[:MAX_EVIDENCE].tolist():
        where = ["its item chunk" if g < 0 else t.chunk_label[g]
                 for g in (int(place[i]), int(place[i + 1]))]
        problems.append(f"cluster {rel.clusters[int(cluster[i])].id}: code "
                        f"{t.codes[int(code[i])]} is in {where[0]} and {where[1]}")
    return problems

