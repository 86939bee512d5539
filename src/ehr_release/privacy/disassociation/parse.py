"""Reading ``release.json``: the published shape, refused with a reason when it is wrong.

Only the shape is checked here; subrecords are checked while :mod:`.tables` flattens them
(one pass over the codes, not two).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

NAME = "disassociation"
RELEASE_FILE = "release.json"


class ReleaseRejected(Exception):
    """The release cannot be read as a disassociated dataset; says what and where."""


@dataclass(frozen=True)
class ParsedCluster:
    """A cluster as published; subrecords stay the JSON lists (checked while flattening)."""

    id: str
    size: int
    chunks: list[list[list[str]]]
    items: list[str]


@dataclass(frozen=True)
class ParsedJoint:
    members: tuple[str, ...]
    chunks: list[list[list[str]]]


@dataclass(frozen=True)
class ParsedRelease:
    k: int
    m: int
    clusters: list[ParsedCluster]
    joints: list[ParsedJoint]


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise ReleaseRejected(what)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _chunk_list(raw: Any, where: str) -> list[list[list[str]]]:
    expect(isinstance(raw, list) and all(type(ch) is list for ch in raw),
            f"{where} is not a list of chunks")
    return raw


def parse_release(files: dict[str, bytes]) -> ParsedRelease:
    """Read ``release.json``; raise :class:`ReleaseRejected` if its shape is wrong.

    Subrecords are checked when :func:`build_tables` flattens them (one pass, not two).
    """
    expect(RELEASE_FILE in files, f"the release has no {RELEASE_FILE}")
    try:
        doc = json.loads(files[RELEASE_FILE])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleaseRejected(f"{RELEASE_FILE} is not valid JSON ({exc})") from None
    expect(isinstance(doc, dict), "the release is not a JSON object")
    expect(doc.get("algorithm") == NAME, f"algorithm is {doc.get('algorithm')!r}, not {NAME!r}")
    for key in ("k", "m"):
        expect(_is_int(doc.get(key)), f"{key!r} is not an integer")
    expect(isinstance(doc.get("clusters"), list), "'clusters' is not a list")
    expect(isinstance(doc.get("joint_clusters", []), list), "'joint_clusters' is not a list")
    clusters = []
    for c in doc["clusters"]:
        expect(isinstance(c, dict) and isinstance(c.get("id"), str), "a cluster has no id")
        cid = c["id"]
        expect(_is_int(c.get("size")), f"cluster {cid}: size is not an integer")
        items = c.get("item_chunk")
        expect(isinstance(items, list) and all(isinstance(t, str) for t in items),
                f"cluster {cid}: item_chunk is not a list of codes")
        expect(len(set(items)) == len(items), f"cluster {cid}: item_chunk repeats a code")
        chunks = _chunk_list(c.get("record_chunks"), f"cluster {cid}: record_chunks")
        clusters.append(ParsedCluster(cid, c["size"], chunks, items))
    joints = []
    for i, j in enumerate(doc.get("joint_clusters", [])):
        expect(isinstance(j, dict) and isinstance(j.get("clusters"), list)
                and all(isinstance(x, str) for x in j["clusters"]),
                f"joint cluster {i + 1}: 'clusters' is not a list of ids")
        chunks = _chunk_list(j.get("shared_chunks"), f"joint cluster {i + 1}: shared_chunks")
        joints.append(ParsedJoint(tuple(j["clusters"]), chunks))
    return ParsedRelease(doc["k"], doc["m"], clusters, joints)

