"""Requirement 2, structure: sizes, chunk lengths, joint clusters and disjoint domains."""

from __future__ import annotations

import numpy as np

from ehr_release.privacy.disassociation.evidence import MAX_EVIDENCE
from ehr_release.privacy.disassociation.parse import ParsedRelease, chunk_label
from ehr_release.privacy.disassociation.tables import Tables


def shape_problems(rel: ParsedRelease, n_original: int, k: int) -> list[str]:
    """Sizes, chunk lengths and joint-cluster membership (everything but code domains)."""
    problems: list[str] = []
    sizes = rel.cluster_size
    total = int(sizes.sum())
    if total != n_original:
        problems.append(f"clusters hold {total:,} records, the original has {n_original:,}")
    for p in np.flatnonzero(sizes < k)[:MAX_EVIDENCE].tolist():
        problems.append(f"cluster {rel.cluster_ids[p]} has {int(sizes[p])} records (< k = {k})")
    for p in np.flatnonzero(rel.joint_named > rel.n_joints)[:MAX_EVIDENCE].tolist():
        problems.append(f"cluster {rel.cluster_ids[p]} names joint cluster "
                        f"J{int(rel.joint_named[p])}, which has no rows")
    in_joint = rel.joint_of_cluster >= 0
    members = np.bincount(rel.joint_of_cluster[in_joint], minlength=rel.n_joints)
    member_size = np.bincount(rel.joint_of_cluster[in_joint], weights=sizes[in_joint],
                              minlength=rel.n_joints).astype(np.int64)
    for j in np.flatnonzero(members < 2)[:MAX_EVIDENCE].tolist():
        problems.append(f"joint cluster {j + 1} must name ≥ 2 distinct clusters")
    for j in np.flatnonzero(member_size != rel.joint_size)[:MAX_EVIDENCE].tolist():
        problems.append(f"joint cluster {j + 1} declares {int(rel.joint_size[j])} records, "
                        f"its clusters hold {int(member_size[j])}")
    expected = np.zeros(len(rel.chunk_owner), dtype=np.int64)
    shared = rel.chunk_shared
    expected[shared] = member_size[rel.chunk_owner[shared]]
    expected[~shared] = sizes[rel.chunk_owner[~shared]]
    for g in np.flatnonzero(rel.chunk_subrecords != expected)[:MAX_EVIDENCE].tolist():
        problems.append(f"{chunk_label(rel, g)} lists {int(rel.chunk_subrecords[g])} "
                        f"subrecords, expected {int(expected[g])}")
    return problems


def domain_problems(rel: ParsedRelease, t: Tables) -> list[str]:
    """Codes published in two places of one cluster (chunks, item chunk, shared chunks)."""
    c = len(t.codes)
    # each shared code counts as a place of every member cluster of its joint cluster
    in_joint = np.flatnonzero(t.joint_of_cluster >= 0)
    by_joint = in_joint[np.argsort(t.joint_of_cluster[in_joint], kind="stable")]
    counts = np.bincount(t.joint_of_cluster[in_joint], minlength=rel.n_joints)
    starts = np.cumsum(counts) - counts
    rep = counts[t.sh_joint]
    offsets = np.arange(int(rep.sum())) - np.repeat(np.cumsum(rep) - rep, rep)
    sh_cluster = by_joint[np.repeat(starts[t.sh_joint], rep) + offsets]
    cluster = np.concatenate([t.dom_cluster, sh_cluster])
    code = np.concatenate([t.dom_code, np.repeat(t.sh_code, rep)])
    key = np.sort(cluster * c + code)
    if not (key[1:] == key[:-1]).any():   # the common case: no code in two places
        return []
    place = np.concatenate([t.dom_chunk, np.repeat(t.sh_chunk, rep)])
    order = np.lexsort((place, code, cluster))
    cluster, code, place = cluster[order], code[order], place[order]
    key = cluster * c + code
    problems = []
    for i in np.flatnonzero(key[1:] == key[:-1])[:MAX_EVIDENCE].tolist():
        where = ["its item chunk" if g < 0 else t.chunk_label[g]
                 for g in (int(place[i]), int(place[i + 1]))]
        problems.append(f"cluster {rel.cluster_ids[int(cluster[i])]}: code "
                        f"{t.codes[int(code[i])]} is in {where[0]} and {where[1]}")
    return problems
