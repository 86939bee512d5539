"""The published shape of a disassociated dataset and its ``release.json`` serialization.

Format (issue 3)::

    {"algorithm": "disassociation", "k": 3, "m": 2,
     "clusters": [{"id": "P1", "size": 5,
                   "record_chunks": [[["296.00", "296.01"], [], ...], ...],
                   "item_chunk": ["401.0"]}],
     "joint_clusters": [{"clusters": ["P1", "P2"],
                         "shared_chunks": [[["834.0", "944.01"], [], ...]]}]}

Every record chunk lists exactly ``size`` subrecords (empty ones as ``[]``); a shared chunk
lists one subrecord per record of its joint cluster. Subrecords are sorted code lists; their
order inside a chunk is random, which is what hides which subrecords belong together.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ehr_release.errors import InputError

ALGORITHM = "disassociation"
RELEASE_FILE = "release.json"

Subrecord = tuple[str, ...]
Chunk = list[Subrecord]


def _chunks(raw: list[list[list[str]]]) -> list[Chunk]:
    return [[tuple(s) for s in chunk] for chunk in raw]


@dataclass(frozen=True)
class PublishedCluster:
    """One cluster: its record chunks (``size`` subrecords each) and its item chunk."""

    id: str
    size: int
    record_chunks: list[Chunk]
    item_chunk: tuple[str, ...]


@dataclass(frozen=True)
class PublishedJointCluster:
    """Clusters sharing chunks: one subrecord per record of all member clusters."""

    clusters: tuple[str, ...]
    shared_chunks: list[Chunk]


@dataclass(frozen=True)
class DisassociatedRelease:
    """A whole disassociated dataset, as published."""

    k: int
    m: int
    clusters: list[PublishedCluster]
    joint_clusters: list[PublishedJointCluster]

    @property
    def n_records(self) -> int:
        return sum(c.size for c in self.clusters)

    def to_json(self) -> dict[str, Any]:
        """The JSON document (tuples serialize as arrays, so chunks are not copied)."""
        return {
            "algorithm": ALGORITHM, "k": self.k, "m": self.m,
            "clusters": [{"id": c.id, "size": c.size, "record_chunks": c.record_chunks,
                          "item_chunk": c.item_chunk} for c in self.clusters],
            "joint_clusters": [{"clusters": j.clusters, "shared_chunks": j.shared_chunks}
                               for j in self.joint_clusters],
        }

    def to_bytes(self) -> bytes:
        """The exact bytes of ``release.json`` (UTF-8, one line, ends with a newline)."""
        return (json.dumps(self.to_json(), ensure_ascii=False) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> DisassociatedRelease:
        """Load a release for reconstruction and utility (the verifier has its own parser).

        Raises
        ------
        InputError
            If the bytes are not a disassociation release.
        """
        try:
            doc = json.loads(data)
            clusters = [PublishedCluster(str(c["id"]), int(c["size"]),
                                         _chunks(c["record_chunks"]), tuple(c["item_chunk"]))
                        for c in doc["clusters"]]
            joints = [PublishedJointCluster(tuple(j["clusters"]), _chunks(j["shared_chunks"]))
                      for j in doc["joint_clusters"]]
            if doc["algorithm"] != ALGORITHM:
                raise ValueError(f"algorithm is {doc['algorithm']!r}")
            return cls(int(doc["k"]), int(doc["m"]), clusters, joints)
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"not a disassociation release: {exc}", file=RELEASE_FILE) from None
