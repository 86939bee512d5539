"""The closed-world declaration of a disassociated release (``disassociation``).

One file, ``release.json`` (one JSON document), e.g.::

    {"algorithm": "disassociation", "k": 3, "m": 2,
     "clusters": [{"id": "P1", "size": 5,
                   "record_chunks": [[["296.00", "296.01"], [], ...], ...],
                   "item_chunk": ["401.0"]}],
     "joint_clusters": [{"clusters": ["P1", "P2"],
                         "shared_chunks": [[["834.0", "944.01"], [], ...]]}]}

The model's adversary knows up to m codes of a target. ``fields_doc`` answers, per published
field, whether that adversary could use it to narrow the target below k records — and why not.
Two facts carry most answers. (1) Every cluster-level field (ids, cluster order, chunk order,
joint membership) is the same for all records of a cluster: at worst it tells the attacker
*which cluster* holds the target, and the attack audit
(:mod:`ehr_release.privacy.attacks.disassociation`) grants the attacker exactly that and still
requires ≥ k candidates inside the cluster. (2) The order of subrecords inside a chunk is the
one field that could link a record's pieces across chunks; it is drawn by an independent
uniform shuffle per chunk (secret randomness; the seed parameter, for tests only, is left out
of the public datasheet), and the attack audit tests every release for a positional reading.
No field answered "yes": the format is unchanged by issue 14.
"""

from __future__ import annotations

import json

from ehr_release.privacy.closed_world import Enum, FileSchema, ListOf, Obj, ReleaseSchema

RELEASE_FILE = "release.json"

#: A chunk: a list of subrecords, each a sorted list of distinct codes (``[]`` when empty).
CHUNK = ListOf(ListOf("str"))

CLUSTER = Obj({
    "id": "str",
    "size": "int",
    "record_chunks": ListOf(CHUNK),
    "item_chunk": ListOf("str"),
})

JOINT_CLUSTER = Obj({
    "clusters": ListOf("str"),
    "shared_chunks": ListOf(CHUNK),
})

RELEASE = Obj({
    "algorithm": Enum(("disassociation",)),
    "k": "int",
    "m": "int",
    "clusters": ListOf(CLUSTER),
    "joint_clusters": ListOf(JOINT_CLUSTER),
})

FIELDS_DOC = {
    "algorithm": "The constant 'disassociation'. No: the same in every release.",
    "k": "The requested k (a parameter, not a figure of the data). No.",
    "m": "The requested m (a parameter, not a figure of the data). No.",
    "clusters": (
        "The clusters, in the order HorPart's split tree leaves them. No: the order is a "
        "cluster-level fact (it reflects which code each split used — which the chunks "
        "already show, since a split code is in every record on one side and none on the "
        "other) and cannot tell two records of one cluster apart; the attack audit assumes "
        "the attacker knows the target's cluster and still finds ≥ k candidates in it."),
    "clusters[].id": (
        "The label P1, P2, … in cluster order, used only to name joint-cluster members. No: "
        "a position, identical for every record of the cluster."),
    "clusters[].size": (
        "The number of records in the cluster (≥ k). No: a cluster-level count; every "
        "record chunk lists exactly this many subrecords anyway, so it adds nothing."),
    "clusters[].record_chunks": (
        "The record chunks, in VerPart's order (by code support, a published figure). No: "
        "cluster-level; each chunk is itself k^m-anonymous."),
    "clusters[].record_chunks[]": (
        "One record chunk: one subrecord per record of the cluster, empty ones included. "
        "No: every ≤ m-itemset occurring in it is held by ≥ k subrecords (checked by the "
        "verifier; the attack audit counts the candidates)."),
    "clusters[].record_chunks[][]": (
        "One subrecord (a record's codes in this chunk's domain), codes sorted. No: its "
        "position in the chunk comes from an independent uniform shuffle of each chunk, so "
        "position i of two chunks need not be the same record; the attack audit tests "
        "every release for a positional reading (positions that would link chunks) and "
        "counts candidates under it when the release can be read that way. Codes are "
        "sorted, so their order inside a subrecord carries nothing."),
    "clusters[].item_chunk": (
        "The codes held by fewer than k records of the cluster, sorted, without counts or "
        "owners. No: any record of the cluster (≥ k) could hold any of them."),
    "joint_clusters": (
        "Groups of neighbouring clusters sharing chunks, in Refine's order. No: "
        "cluster-level."),
    "joint_clusters[].clusters": (
        "The member cluster ids, in cluster order. No: cluster-level; the order fixes how a "
        "positional reading would map shared subrecords to member records, which the attack "
        "audit tests."),
    "joint_clusters[].shared_chunks": (
        "Chunks over the records of all members (one subrecord per record, shuffled like "
        "record chunks). No: each is k^m-anonymous over ≥ 2k records; which member a shared "
        "subrecord belongs to is not published."),
    "(identifiers)": "None: no patient id, pseudonym or per-record label is published.",
    "(counts)": (
        "No per-record count is published; item-chunk code counts are not published "
        "either (only that each is below k in its cluster)."),
}

SCHEMA = ReleaseSchema(files=(
    FileSchema(
        name=RELEASE_FILE, format="json", root=RELEASE,
        doc="The whole disassociated dataset: clusters of ≥ k records whose codes are split "
            "into independently shuffled k^m-anonymous chunks, an item chunk of rare codes "
            "per cluster, and chunks shared by joint clusters.",
        fields_doc=FIELDS_DOC),
))


def count_records(files: dict[str, bytes]) -> int:
    """Patient records in a release: the sum of its cluster sizes (0 when unreadable)."""
    try:
        doc = json.loads(files.get(RELEASE_FILE, b"") or b"{}")
        return sum(int(c["size"]) for c in doc.get("clusters", []))
    except (ValueError, TypeError, KeyError, AttributeError):
        return 0
