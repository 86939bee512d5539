"""The bytes of an LDA release and reading them back.

``trajectories.jsonl``: one line per patient, ``{"patient_id": ..., "trajectory": [["401",
[33, 36]], ...]}`` — ICD node (the hierarchy's root name when fully generalized) and the age
block as [first, last]. Lines are ordered by patient id (the flow then replaces the ids by
pseudonyms and orders by those), so the order of lines never follows the extract's order or
the order in which clusters were formed. There is no cluster id: members of a cluster publish
the same trajectory anyway, and the id's value (the MDAV formation order, which starts from
the record farthest from the most frequent trajectory) is derived from the data.
``lda.json``: k, method, weights, leaf convention and age domain. Not the loss (ILM, ALM):
it is a mean over each patient's *original* trajectory length, which the release hides, and
a verifier could check its last digits only within a tolerance; the utility report has it.
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
    rows = sorted(zip(patient_ids, result.published, strict=True), key=lambda r: r[0])
    lines = [json.dumps({"patient_id": pid,
                         "trajectory": [[code, [lo, hi]] for code, (lo, hi) in traj]},
                        ensure_ascii=False)
             for pid, traj in rows]
    return {RECORDS_FILE: ("\n".join(lines) + "\n").encode() if lines else b"",
            META_FILE: (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()}


def read_records(data: bytes) -> list[tuple[str, list[PublishedPair]]]:
    out = []
    for line in data.decode().splitlines():
        if line.strip():
            obj = json.loads(line)
            out.append((str(obj["patient_id"]),
                        [(str(c), (int(a[0]), int(a[1]))) for c, a in obj["trajectory"]]))
    return out
