"""The bytes of a GCCens release and reading them back.

``censored.jsonl``: one line per sample patient, ``{"patient_id": ..., "codes": {code:
count}}`` with codes sorted and censored-away codes omitted; lines sorted by ``patient_id``
(after the flow's pseudonymization, a random order), so the order of the extract never shows.
``censoring.json``: the run's parameters — k and the caps policy as declared (a count equal
to its cap may be right-censored, which a researcher needs to know) — and the size and
fingerprint of the population mapped against. Nothing derived from the sample: no list of the
sample's codes, no per-code maxima, no censoring steps (issue 14, finding 2: an attacker
holding the population would learn who is in the sample).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ehr_release.algorithms.gccens.censor import CensoringResult

RECORDS_FILE = "censored.jsonl"
META_FILE = "censoring.json"


def release_files(patient_ids: Sequence[str], result: CensoringResult, *, k: int,
                  population: dict[str, Any]) -> dict[str, bytes]:
    """Serialize ``result`` (records in sample order) into the release files."""
    rows = sorted(zip(patient_ids, result.released, strict=True), key=lambda row: row[0])
    lines = [json.dumps({"patient_id": pid, "codes": dict(sorted(rec.items()))},
                        ensure_ascii=False) for pid, rec in rows]
    meta = {"k": k, "caps": dict(sorted(result.policy.items())), "population": population}
    return {RECORDS_FILE: ("\n".join(lines) + "\n").encode() if lines else b"",
            META_FILE: (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()}


def read_records(data: bytes) -> list[tuple[str, dict[str, int]]]:
    """(patient id, code counts) per line of ``censored.jsonl``."""
    out = []
    for line in data.decode().splitlines():
        if line.strip():
            obj = json.loads(line)
            out.append((str(obj["patient_id"]), {str(c): int(n) for c, n in obj["codes"].items()}))
    return out
