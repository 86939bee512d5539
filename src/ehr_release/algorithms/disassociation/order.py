"""The documented order of the subrecords inside a chunk (issue 32, part 3).

A chunk's subrecords must be published in an order that links nothing across chunks. A
random shuffle does that, but a reader cannot tell a shuffle from an order chosen to carry a
hidden value (position i of every chunk = the same patient, or subrecords sorted by size):
the free choice would be trusted. So the order is a documented function of the chunk's own
published content: subrecords sorted by

    SHA-256(json.dumps([TAG, group, chunk, codes, copy], ensure_ascii=False,
                       separators=(",", ":")).encode("utf-8"))

with ``group`` the published label (``P3``, ``J1``), ``chunk`` the chunk's number, ``codes``
the subrecord's codes (ascending, the published list) and ``copy`` 0, 1, … numbering
identical subrecords of the chunk. Why this is private: the order is a function of the
chunk's multiset of subrecords, which is published anyway, so it can tell nobody anything
the multisets do not (which subrecords of two chunks are one record's is never an input);
the hash, separated by group and chunk, makes the positions of two chunks unrelated to each
other. Why it needs no key: there is nothing to hide in it — and so anyone holding the
release (a recipient, an outside auditor) replays it exactly; ``privacy/disassociation``
does, with its own code.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

TAG = "ehr_release.disassociation.subrecord-order/1"


def _digest(group: str, chunk: int, codes: Sequence[str], copy: int) -> bytes:
    text = json.dumps([TAG, group, chunk, list(codes), copy], ensure_ascii=False,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).digest()


def ordered_chunk(group: str, chunk: int, subrecords: Sequence[tuple[str, ...]]
                  ) -> list[tuple[str, ...]]:
    """``subrecords`` (one chunk's, any order) in the documented order."""
    copies: dict[tuple[str, ...], int] = {}
    keyed = []
    for sub in subrecords:
        copy = copies.get(sub, 0)
        copies[sub] = copy + 1
        keyed.append((_digest(group, chunk, sub, copy), sub))
    keyed.sort()
    return [sub for _, sub in keyed]
