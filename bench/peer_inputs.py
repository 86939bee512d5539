"""The records and 374 utility constraints issue 37 measured the C++ program on (goal 1).

Issue 37's 13.9 s for the public C++ program (``ikotsov/Disassociation-Algorithm``) was
measured on that repository's own inputs: ``data/dataset_final.csv`` (58,302 records) and
``data/utility_constraints_final.json`` (374 constraints). Neither is shipped here (the
repository states no licence for its data). Both are determined by the repository's list of
631 codes, ``data/diagnosis_codes_final.csv``, and the recipe of its notebook
``notebooks/dataset_generation.ipynb``:

* each record has ``clip(Poisson(5.11), 1, 43)`` codes drawn without replacement, uniformly,
  from the 631 codes, all from one ``numpy.random.default_rng(42)`` stream;
* one constraint per group of codes sharing their first three characters, in the list's order.

:func:`peer_records` follows that recipe, and :func:`check_reproduced` holds the result to
what the stored file is known to be (58,302 lines, 2,023,863 bytes as stored, with quotes
around multi-code lines), so a numpy that drew differently would be noticed, not measured.

The list writes ICD-9 E codes as its notebook normalized them, a dot after the third
character (``E80.5`` for E805, ``E82.08`` for E820.8): not nodes of ICD-9-CM, so a governed
run would refuse them. :func:`icd9_form` rewrites them (``E805``, ``E820.8``): a one-to-one
relabelling, so the records, their groups and the constraints keep their shape. The C++
program gets the codes as the peer wrote them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

NUM_RECORDS = 58_302
MEAN_CODES = 5.11
MAX_CODES = 43
SEED = 42
#: The stored ``dataset_final.csv``: its size with a quote pair around each multi-code line.
STORED_BYTES = 2_023_863
STORED_CONSTRAINTS = 374


def read_codes(path: Path) -> list[str]:
    """The 631 codes of ``diagnosis_codes_final.csv`` (one per line under a header)."""
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [line.strip().strip('"') for line in lines if line.strip()]


def peer_records(codes: list[str]) -> list[list[str]]:
    """The notebook's records, in its order and with its codes' order within a record."""
    rng = np.random.default_rng(SEED)
    counts = np.clip(rng.poisson(lam=MEAN_CODES, size=NUM_RECORDS), 1, MAX_CODES)
    return [rng.choice(codes, size=int(c), replace=False).tolist() for c in counts]


def peer_constraints(codes: list[str]) -> dict[str, list[str]]:
    """One constraint per 3-character prefix, named ``u1``… in the list's order."""
    groups: dict[str, list[str]] = {}
    for code in codes:
        groups.setdefault(code[:3], []).append(code)
    return {f"u{i}": group for i, group in enumerate(groups.values(), start=1)}


def check_reproduced(records: list[list[str]], constraints: dict[str, list[str]]) -> None:
    """Refuse to measure anything but the peer's own inputs."""
    stored = sum(len(",".join(r)) + 1 + (2 if len(r) > 1 else 0) for r in records)
    if len(records) != NUM_RECORDS or stored != STORED_BYTES:
        raise SystemExit(f"the records differ from the stored dataset_final.csv "
                         f"({len(records)} records, {stored} bytes as stored; expected "
                         f"{NUM_RECORDS} and {STORED_BYTES})")
    if len(constraints) != STORED_CONSTRAINTS:
        raise SystemExit(f"{len(constraints)} constraints, expected {STORED_CONSTRAINTS}")


def icd9_form(code: str) -> str:
    """An E code as ICD-9-CM writes it (``E80.51`` → ``E805.1``); other codes unchanged."""
    if not code.startswith("E"):
        return code
    digits = code.replace(".", "")
    return digits if len(digits) <= 4 else f"{digits[:4]}.{digits[4:]}"


def write_peer_inputs(codes_file: Path, folder: Path) -> dict[str, Path]:
    """The C++ program's records and constraints, and the same as a governed run's extract
    (``patient_id``, ``codes``) and YAML policy (JSON is YAML)."""
    codes = read_codes(codes_file)
    records = peer_records(codes)
    constraints = peer_constraints(codes)
    check_reproduced(records, constraints)
    cpp_records = folder / "peer-records.csv"
    cpp_records.write_text("".join(",".join(r) + "\n" for r in records), encoding="utf-8")
    cpp_constraints = folder / "peer-constraints.json"
    cpp_constraints.write_text(json.dumps(constraints), encoding="utf-8")
    extract = folder / "peer-extract.csv"
    extract.write_text("patient_id,codes\n" + "".join(
        f"P{i:05d},{';'.join(icd9_form(c) for c in r)}\n"
        for i, r in enumerate(records, start=1)), encoding="utf-8")
    policy = folder / "peer-374.yaml"
    policy.write_text(json.dumps({name: [icd9_form(c) for c in group]
                                  for name, group in constraints.items()}), encoding="utf-8")
    return {"cpp_records": cpp_records, "cpp_constraints": cpp_constraints,
            "extract": extract, "policy": policy}
