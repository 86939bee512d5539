"""Requirement 7, choices replayed: the clusters, their order, the chunks and their order, and
the joint clusters are exactly what HorPart, VerPart and Refine make of the original.

k^m-anonymity bounds a release from one side only: a releaser could group records by a
hidden per-patient bit (clusters of "bit = 1" patients, each still ≥ k and k^m-anonymous),
put a chosen code in its own chunk, or swap two clusters' places, and every count of
requirements 1–5 would hold (issue 32). None of these is a free choice, though: given the
original, the utility policy, k, m and maxClusterSize the three steps are deterministic
under the rules the format documents (:mod:`.replay_horpart`, :mod:`.replay_verpart`,
:mod:`.replay_refine`). So the site's verifier, which holds the original, replays them with
code of its own and requires the published clusters, chunks and joint clusters to be
exactly the replayed ones, content and order; with the subrecord order (requirement 6) and
the format's canonical rendering, that pins down every byte.

The replay needs the original, so a recipient cannot run it; it needs no key (nothing in
these steps is random). The report names groups and chunks only, never a code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ehr_release.model.reports import Requirement
from ehr_release.privacy.disassociation.evidence import MAX_EVIDENCE
from ehr_release.privacy.disassociation.parse import ParsedRelease
from ehr_release.privacy.disassociation.replay_horpart import clusters as horpart
from ehr_release.privacy.disassociation.replay_refine import Cluster, refine
from ehr_release.privacy.disassociation.replay_verpart import Row, verpart
from ehr_release.privacy.disassociation.tables import Tables

NAME = "choices replayed"
#: Refine's bound on a joint cluster, in multiples of maxClusterSize (format, field ``joint``).
JOINT_FACTOR = 4


@dataclass(frozen=True)
class Choices:
    """What the deterministic steps depend on besides the original, k and m: the utility
    policy (code → constraint number) and maxClusterSize (None: 2k)."""

    constraint_of: Mapping[str, int]
    max_cluster_size: int | None = None


Chunk = tuple[Row, ...]          # a chunk's subrecords, sorted (order is requirement 6's)


@dataclass(frozen=True)
class Shape:
    """A release as content only: per cluster its size, joint cluster (-1: none), item-chunk
    codes and record chunks; per joint cluster its members and shared chunks."""

    sizes: list[int]
    joint_of: list[int]
    items: list[tuple[int, ...]]
    chunks: list[list[Chunk]]
    members: list[tuple[int, ...]]
    shared: list[list[Chunk]]


def _chunk(rows: Sequence[Row], domain: frozenset[int]) -> Chunk:
    return tuple(sorted(tuple(t for t in row if t in domain) for row in rows))


def replayed(tables: Tables, k: int, m: int, choices: Choices) -> Shape:
    """The release HorPart, VerPart and Refine make of the original (as content)."""
    constraint = np.array([choices.constraint_of.get(c, -1) for c in tables.codes],
                          dtype=np.int64)
    lookup = constraint.tolist()
    max_size = choices.max_cluster_size or 2 * k
    flat, bounds = tables.orig_codes.tolist(), tables.orig_indptr.tolist()
    records = [tuple(flat[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    groups = horpart(records, lookup, k, max_size, (tables.orig_indptr, tables.orig_codes))
    rows = [[records[r] for r in g] for g in groups]
    split = [verpart(r, k, m, lookup) for r in rows]
    clusters = [Cluster(r, frozenset(t for d in domains for t in d), items)
                for r, (domains, items) in zip(rows, split, strict=True)]
    joints = refine(clusters, k, m, lookup, JOINT_FACTOR * max_size)
    joint_of = [-1] * len(groups)
    shared_codes = [frozenset[int]()] * len(groups)
    for j, unit in enumerate(joints):
        for p in unit.members:
            joint_of[p], shared_codes[p] = j, unit.shared_codes
    return Shape(
        sizes=[len(r) for r in rows], joint_of=joint_of,
        items=[tuple(sorted(set(items) - shared_codes[p]))
               for p, (_, items) in enumerate(split)],
        chunks=[[_chunk(r, frozenset(d)) for d in domains]
                for r, (domains, _) in zip(rows, split, strict=True)],
        members=[u.members for u in joints],
        shared=[[_chunk([row for p in u.members for row in rows[p]], frozenset(d))
                 for d in u.shared] for u in joints])


def published(rel: ParsedRelease, tables: Tables) -> Shape:
    """The parsed release as content, over the tables' code numbering."""
    index = {c: i for i, c in enumerate(tables.codes)}
    own = np.array([index[c] for c in rel.code_names], dtype=np.int64)
    flat, bounds = tables.sub_codes.tolist(), tables.sub_indptr.tolist()
    per_chunk: list[list[Row]] = [[] for _ in range(len(rel.chunk_owner))]
    for s, g in enumerate(rel.sub_chunk.tolist()):
        per_chunk[g].append(tuple(flat[bounds[s]:bounds[s + 1]]))
    n = rel.n_clusters
    chunks: list[list[Chunk]] = [[] for _ in range(n)]
    shared: list[list[Chunk]] = [[] for _ in range(rel.n_joints)]
    for g, (owner, is_shared) in enumerate(zip(rel.chunk_owner.tolist(),
                                               rel.chunk_shared.tolist(), strict=True)):
        (shared if is_shared else chunks)[owner].append(tuple(sorted(per_chunk[g])))
    items: list[list[int]] = [[] for _ in range(n)]
    for p, t in zip(rel.item_cluster.tolist(), own[rel.item_code].tolist(), strict=True):
        items[p].append(t)
    joint_of = rel.joint_of_cluster.tolist()
    return Shape(sizes=rel.cluster_size.tolist(), joint_of=joint_of,
                 items=[tuple(sorted(i)) for i in items], chunks=chunks,
                 members=[tuple(p for p in range(n) if joint_of[p] == j)
                          for j in range(rel.n_joints)],
                 shared=shared)


def differences(got: Shape, want: Shape) -> list[str]:
    """Where the published shape departs from the replayed one: group and chunk labels (a
    label is a position), never a code."""
    out: list[str] = []
    if len(got.sizes) != len(want.sizes):
        out.append(f"{len(got.sizes):,} clusters published, {len(want.sizes):,} replayed")
    for p in range(min(len(got.sizes), len(want.sizes))):
        label = f"P{p + 1}"
        if got.sizes[p] != want.sizes[p] or got.chunks[p] != want.chunks[p]:
            if len(got.chunks[p]) != len(want.chunks[p]) or got.sizes[p] != want.sizes[p]:
                out.append(f"{label}: not the records HorPart puts there")
            else:
                where = [j + 1 for j, (a, b) in enumerate(zip(got.chunks[p], want.chunks[p],
                                                              strict=True)) if a != b]
                out.append(f"{label} record chunk {where[0]}: not VerPart's chunk")
        elif got.items[p] != want.items[p]:
            out.append(f"{label} item chunk: not what VerPart and Refine leave")
    if len(got.members) != len(want.members):
        out.append(f"{len(got.members):,} joint clusters published, {len(want.members):,} "
                   "replayed")
    for j in range(min(len(got.members), len(want.members))):
        if got.members[j] != want.members[j]:
            out.append(f"J{j + 1}: not the clusters Refine joins")
        elif got.shared[j] != want.shared[j]:
            out.append(f"J{j + 1}: shared chunks are not Refine's")
    return out


def choices_requirement(rel: ParsedRelease, tables: Tables, k: int, m: int,
                        choices: Choices) -> Requirement:
    """The published clusters, chunks and joint clusters, in order, exactly as replayed."""
    found = differences(published(rel, tables), replayed(tables, k, m, choices))
    return Requirement(
        NAME, "clusters (HorPart), record chunks (VerPart) and joint clusters (Refine), content "
        "and order, exactly as the documented rules make them of the original (exact replay "
        "with the verifier's own code; needs the original, no key)",
        f"{rel.n_clusters:,} clusters and {rel.n_joints:,} joint clusters replayed; " + (
            "all as replayed" if not found else
            f"{len(found)} difference(s), e.g. {found[0]}"),
        not found, {"differences": found[:MAX_EVIDENCE]})
