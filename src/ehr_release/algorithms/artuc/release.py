"""The published bytes: one JSON object per released record (JSON Lines).

``{"cluster": "C3", "demographics": {"age": [19, 30], "origin": "Europe", "gender": "All"},
"codes": [["053.20", "053.71"], ["493.2"], ["494.1"]]}``

Numerical values are ``[low, high]``, categorical ones a hierarchy node, each generalized
code the sorted list of codes it stands for. Records carry no identifier and no per-record
count: the number of codes a record lost is not published (issue 14: an attacker knowing a
code missing from a patient's cluster would learn that the patient's record is one of the
few that lost a code). The suppression totals belong in the utility report.

The order is a function of the published content alone, never of the input order or of the
algorithm's processing order: each cluster's lines are sorted, clusters are sorted by their
sorted lines, and the labels ``C1``, ``C2``, … number the clusters in that order.
"""

from __future__ import annotations

import json
from typing import Any

from ehr_release.algorithms.artuc.artuc import Anonymization

RECORDS_FILE = "records.jsonl"


def _value(v: Any) -> Any:
    if isinstance(v, list):
        return [_value(x) for x in v]
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _bodies(anon: Anonymization) -> list[list[str]]:
    """Per cluster, the sorted JSON text of its records without the cluster label."""
    names = anon.table.names
    out: list[list[str]] = []
    for cluster, gen in zip(anon.clusters, anon.codes, strict=True):
        demographics = json.dumps({k: _value(v)
                                   for k, v in anon.space.describe(cluster.box).items()})
        item_codes = {i: [names[c] for c in codes] for i, codes in gen.items.items()}
        items: list[set[int]] = [set() for _ in range(cluster.size)]
        for r, it in zip(gen.rec.tolist(), gen.item.tolist(), strict=True):
            if it >= 0:  # −1: a suppressed code, not published
                items[r].add(it)
        out.append(sorted(f'"demographics": {demographics}, "codes": '
                          f"{json.dumps(sorted(item_codes[i] for i in its))}}}"
                          for its in items))
    return out


def to_jsonl(anon: Anonymization) -> bytes:
    """Serialize an anonymization; the same clusters always give the same bytes, whatever
    the order of the input records or of the clusters."""
    lines: list[str] = []
    for number, block in enumerate(sorted(_bodies(anon)), 1):
        head = json.dumps({"cluster": f"C{number}"})[:-1]
        lines.extend(f"{head}, {body}" for body in block)
    return "".join(line + "\n" for line in lines).encode("utf-8")


def release_files(anon: Anonymization) -> dict[str, bytes]:
    return {RECORDS_FILE: to_jsonl(anon)}
