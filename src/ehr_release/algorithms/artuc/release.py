"""The published bytes: one JSON object per released record (JSON Lines).

``{"cluster": "C3", "demographics": {"age": [19, 30], "origin": "Europe", "gender": "All"},
"codes": [["053.20", "053.71"], ["493.2"], ["494.1"]], "suppressed": 0}``

Numerical values are ``[low, high]``, categorical ones a hierarchy node, each generalized
code the sorted list of codes it stands for, ``suppressed`` the number of the record's codes
that were deleted. Records carry no identifier and are written cluster by cluster in a
canonical order (sorted by content), so their position reveals nothing about the input order.
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


def to_jsonl(anon: Anonymization) -> bytes:
    """Serialize an anonymization; the same anonymization always gives the same bytes."""
    names = anon.table.names
    lines: list[str] = []
    for number, (cluster, gen) in enumerate(zip(anon.clusters, anon.codes, strict=True), 1):
        demographics = {k: _value(v) for k, v in anon.space.describe(cluster.box).items()}
        item_codes = {i: [names[c] for c in codes] for i, codes in gen.items.items()}
        items: list[set[int]] = [set() for _ in range(cluster.size)]
        lost = [0] * cluster.size
        for r, it in zip(gen.rec.tolist(), gen.item.tolist(), strict=True):
            if it < 0:
                lost[r] += 1
            else:
                items[r].add(it)
        block = [json.dumps({"cluster": f"C{number}", "demographics": demographics,
                             "codes": sorted(item_codes[i] for i in its),
                             "suppressed": lost[r]})
                 for r, its in enumerate(items)]
        lines.extend(sorted(block))
    return "".join(line + "\n" for line in lines).encode("utf-8")


def release_files(anon: Anonymization) -> dict[str, bytes]:
    return {RECORDS_FILE: to_jsonl(anon)}
