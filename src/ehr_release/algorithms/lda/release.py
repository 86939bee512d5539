"""The bytes of an LDA release and reading them back.

``trajectories.jsonl``: one line per patient, ``{"patient_id": ..., "cluster": ...,
"trajectory": [["401", [33, 36]], ...]}`` — ICD node (the hierarchy's root name when fully
generalized) and the age block as [first, last]. ``lda.json``: k, method, weights, leaf
convention, age domain and the loss the algorithm measured (ILM, ALM), which the verifier
recomputes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ehr_release.algorithms.lda.anonymize import LdaResult, PublishedPair

RECORDS_FILE = "trajectories.jsonl"
META_FILE = "lda.json"


def release_files(patient_ids: Sequence[str], result: LdaResult,
                  meta: dict[str, Any]) -> dict[str, bytes]:
    lines = [json.dumps({"patient_id": pid, "cluster": c,
                         "trajectory": [[code, [lo, hi]] for code, (lo, hi) in traj]},
                        ensure_ascii=False)
             for pid, c, traj in zip(patient_ids, result.cluster_of, result.published,
                                     strict=True)]
    info = {**meta, "ilm": result.ilm, "alm": result.alm,
            "clusters": len(set(result.cluster_of))}
    return {RECORDS_FILE: ("\n".join(lines) + "\n").encode() if lines else b"",
            META_FILE: (json.dumps(info, indent=2, sort_keys=True) + "\n").encode()}


def read_records(data: bytes) -> list[tuple[str, int, list[PublishedPair]]]:
    out = []
    for line in data.decode().splitlines():
        if line.strip():
            obj = json.loads(line)
            out.append((str(obj["patient_id"]), int(obj["cluster"]),
                        [(str(c), (int(a[0]), int(a[1]))) for c, a in obj["trajectory"]]))
    return out
