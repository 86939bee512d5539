"""The population a GCCens sample is k-mapped against: a second dataset, read like the input.

Below the registry, the verifier and the evaluation, so each can read it (or take it from
the release's plan, :mod:`ehr_release.parameters.prepared`) without importing the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ehr_release.core.errors import InputError
from ehr_release.parameters.prepared import prepared


@dataclass(frozen=True)
class Population:
    """The population as GCCens needs it: ids, code multisets, and what identifies it."""

    ids: list[str]
    multisets: list[dict[str, int]]
    info: dict[str, Any]
    code_system: str = "icd9"  # the population file's, detected as any extract's


def load_population(path: str) -> Population:
    """Read the population dataset at ``path``."""
    from ehr_release.ingest.readers import read_dataset

    p = Path(path).resolve()
    if not p.exists():
        raise InputError("population dataset does not exist", file=str(path))
    dataset = read_dataset(p)
    multisets = [dict(m) for m in dataset.code_multisets()]
    return Population(dataset.patient_ids, multisets,
                      {"records": dataset.n_patients, "fingerprint": fingerprint(multisets)},
                      dataset.code_system)


def fingerprint(multisets: list[dict[str, int]]) -> str:
    """SHA-256 of the population as k-map's adversary holds it: its code multisets, sorted.

    Published in the release (``censoring.json``), so it commits to nothing else: not the
    extract's patient ids, demographics or class column, nor its row order — a hash of
    those would let whoever knows all but one value of the population (the sample is part
    of it) confirm the last one by trying each candidate.
    """
    import hashlib
    import json

    lines = sorted(json.dumps(sorted(m.items()), separators=(",", ":")) for m in multisets)
    digest = hashlib.sha256(b"ehr_release.population.codes.v1\n")
    for line in lines:
        digest.update(line.encode() + b"\n")
    return digest.hexdigest()


def population_of(params: Mapping[str, Any]) -> Population:
    """The population ``params['population']`` names, as the release's plan read it once (a
    large one takes seconds: 301,423 records, ~10 s), else read now."""
    return prepared(params, "population", lambda: load_population(params["population"]))
