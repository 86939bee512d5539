"""Test-side reader and writer of ``release.parquet`` (issue 18), written apart from both the
algorithm's serializer and the verifier's reader.

Tests that break a release on purpose edit the nested form (``{"k", "m", "clusters":
[{"id", "size", "record_chunks", "item_chunk"}], "joint_clusters": [{"clusters",
"shared_chunks"}]}``, the JSON document published until issue 18) and write it back as the
long table, or edit the table itself for what the nested form cannot say (an extra column, a
row order). The writer does not validate: a broken document gives a broken table.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ehr_release.privacy.formats.disassociation import RENDERING

RELEASE_FILE = "release.parquet"
INTS = ("k", "m", "size", "chunk", "subrecord")
OPTIONS = dict(RENDERING.options)  # the verifier's declared rendering


def read_doc(data: bytes) -> dict[str, Any]:
    """The nested form of a release, from one ``pandas.read_parquet`` call."""
    frame = pd.read_parquet(io.BytesIO(data))
    doc: dict[str, Any] = {"k": int(frame["k"].iloc[0]), "m": int(frame["m"].iloc[0]),
                           "clusters": [], "joint_clusters": []}
    members: dict[str, list[str]] = {}
    for label, rows in frame.groupby("group", sort=False):
        chunks: dict[int, dict[int, list[str]]] = {}
        for chunk, sub, code in zip(rows["chunk"], rows["subrecord"], rows["code"],
                                    strict=True):
            codes = chunks.setdefault(int(chunk), {}).setdefault(int(sub), [])
            if code is not None:
                codes.append(code)
        listed = [[chunks[c][s] for s in sorted(chunks[c])] for c in sorted(chunks) if c > 0]
        if str(label).startswith("P"):
            doc["clusters"].append({"id": label, "size": int(rows["size"].iloc[0]),
                                    "record_chunks": listed,
                                    "item_chunk": chunks.get(0, {0: []})[0]})
            if rows["joint"].iloc[0] is not None:
                members.setdefault(rows["joint"].iloc[0], []).append(label)
        else:
            doc["joint_clusters"].append({"clusters": members.get(label, []),
                                          "shared_chunks": listed})
    return doc


def doc_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The table rows of a nested release; clusters and joint clusters relabelled by position."""
    label = {c["id"]: f"P{i + 1}" for i, c in enumerate(doc["clusters"])}
    joint_of = {x: f"J{n + 1}" for n, j in enumerate(doc["joint_clusters"])
                for x in j["clusters"]}
    size_of = {c["id"]: c["size"] for c in doc["clusters"]}
    rows: list[dict[str, Any]] = []

    def emit(group: str, size: int, joint: str | None, chunk: int, sub: int,
             codes: list[Any]) -> None:
        for code in codes or [None]:
            rows.append({"k": doc["k"], "m": doc["m"], "group": group, "size": size,
                         "joint": joint, "chunk": chunk, "subrecord": sub, "code": code})

    for c in doc["clusters"]:
        group, joint = label[c["id"]], joint_of.get(c["id"])
        emit(group, c["size"], joint, 0, 0, list(c["item_chunk"]))
        for n, chunk in enumerate(c["record_chunks"], start=1):
            for pos, sub in enumerate(chunk):
                emit(group, c["size"], joint, n, pos, list(sub))
    for n, j in enumerate(doc["joint_clusters"], start=1):
        size = sum(size_of.get(x, 0) for x in j["clusters"])
        for number, chunk in enumerate(j["shared_chunks"], start=1):
            for pos, sub in enumerate(chunk):
                emit(f"J{n}", size, f"J{n}", number, pos, list(sub))
    return rows


def table_of(rows: list[dict[str, Any]]) -> pa.Table:
    types = {name: pa.int32() if name in INTS else pa.string()
             for name in ("k", "m", "group", "size", "joint", "chunk", "subrecord", "code")}
    return pa.table({name: pa.array([r[name] for r in rows], kind)
                     for name, kind in types.items()})


def write_table(table: pa.Table, **options: Any) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **{**OPTIONS, **options})
    return out.getvalue()


def files_of(doc: dict[str, Any]) -> dict[str, bytes]:
    """``{"release.parquet": bytes}`` of a nested release."""
    return {RELEASE_FILE: write_table(table_of(doc_rows(doc)))}


def unshuffled() -> Any:
    """A context in which the anonymizer leaves every chunk in record order (slot order):
    position i of each chunk of a cluster is then the same record — the release the
    documented subrecord order (issue 32) exists to rule out. For planting that release."""
    from unittest.mock import patch

    from ehr_release.algorithms.disassociation import core

    return patch.object(core, "ordered_chunk", lambda _group, _chunk, subs: list(subs))


def in_documented_order(doc: dict[str, Any]) -> dict[str, Any]:
    """A nested release with every record and shared chunk in the documented subrecord order
    (issue 32; the algorithm's rule, labels as :func:`doc_rows` numbers them): for
    releases written by hand, e.g. from a worked example given in record order."""
    from ehr_release.algorithms.disassociation.order import ordered_chunk

    out = {**doc, "clusters": [], "joint_clusters": []}
    for i, c in enumerate(doc["clusters"]):
        out["clusters"].append({**c, "record_chunks": [
            [list(s) for s in ordered_chunk(f"P{i + 1}", n, [tuple(s) for s in chunk])]
            for n, chunk in enumerate(c["record_chunks"], start=1)]})
    for j, joint in enumerate(doc["joint_clusters"]):
        out["joint_clusters"].append({**joint, "shared_chunks": [
            [list(s) for s in ordered_chunk(f"J{j + 1}", n, [tuple(s) for s in chunk])]
            for n, chunk in enumerate(joint["shared_chunks"], start=1)]})
    return out
