"""Requirement 6, subrecord order: every chunk lists its subrecords in the documented order.

The order of the subrecords inside a chunk is the one choice the model leaves free, and the
one published field that could link a record's pieces across chunks: a release whose
position i is the same patient in every chunk of a cluster, or whose chunks are sorted by
subrecord size, keeps every count of k^m-anonymity yet tells a reader which subrecords go
together. So the order is not trusted: it must be exactly the documented rule of the format
(:mod:`ehr_release.privacy.formats.disassociation`, field ``subrecord``) — subrecords sorted
by SHA-256 of ``json.dumps([TAG, group, chunk, codes, copy])`` — recomputed here from the
published bytes alone, with code of its own (the algorithm's writer is another
implementation). The rule depends on the published content only, so it needs no key and no
original: a recipient or an outside auditor replays it exactly, like the site.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ehr_release.privacy.disassociation.parse import ParsedRelease, chunk_label

#: The rule's domain-separation tag, as the format declaration documents it.
TAG = "ehr_release.disassociation.subrecord-order/1"


def sort_key(group: str, chunk: int, codes: list[str], copy: int) -> bytes:
    """The documented sort key of one subrecord (``copy``: its number among identical ones)."""
    message = json.dumps([TAG, group, chunk, codes, copy], ensure_ascii=False,
                         separators=(",", ":"))
    return hashlib.sha256(message.encode("utf-8")).digest()


def _group_label(rel: ParsedRelease, g: int) -> str:
    owner = int(rel.chunk_owner[g])
    return f"J{owner + 1}" if rel.chunk_shared[g] else rel.cluster_ids[owner]


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def misordered_chunks(rel: ParsedRelease) -> list[str]:
    """The chunks (as a report names them) whose subrecords are not in the documented order.

    Identical subrecords are interchangeable (same bytes), so each chunk's listed sequence
    is compared with its own multiset sorted by the rule. The message of :func:`sort_key` is
    assembled from pieces here — the chunk's prefix once, each distinct code list's JSON
    once — which gives the same bytes at a fraction of the cost on a large release.
    """
    flat = np.asarray(rel.code_names, dtype=object)[rel.sub_codes].tolist()
    bounds = np.r_[0, np.cumsum(rel.chunk_subrecords)].tolist()
    indptr = rel.sub_indptr.tolist()
    spelled: dict[tuple[str, ...], str] = {}
    bad: list[str] = []
    for g in range(len(rel.chunk_owner)):
        head = _dumps([TAG, _group_label(rel, g), int(rel.chunk_number[g])])[:-1] + ","
        seen: dict[tuple[str, ...], int] = {}
        listed, keys = [], []
        for s in range(bounds[g], bounds[g + 1]):
            codes = tuple(flat[indptr[s]:indptr[s + 1]])
            copy = seen.get(codes, 0)
            seen[codes] = copy + 1
            if codes not in spelled:
                spelled[codes] = _dumps(list(codes))
            message = f"{head}{spelled[codes]},{copy}]"
            keys.append(hashlib.sha256(message.encode("utf-8")).digest())
            listed.append(codes)
        if [listed[i] for i in sorted(range(len(keys)), key=keys.__getitem__)] != listed:
            bad.append(chunk_label(rel, g))
    return bad
