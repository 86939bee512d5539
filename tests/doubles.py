"""A tiny honest algorithm used to test the pipeline without depending on a real one.

``code-counts`` publishes the number of patients with each code, keeping only codes held by
at least k patients (a threshold release). Its verifier recounts from the original data.
``leaky-code-counts`` publishes every count, so its release fails verification — the flow
must then publish nothing.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from ehr_release.model.reports import AttackReport, Requirement, UtilityReport, VerificationReport
from ehr_release.parameters.params import Interval, Param
from ehr_release.privacy.closed_world import FileSchema, ListOf, MapOf, Obj, ReleaseSchema
from ehr_release.registry import AlgorithmEntry

PARAMS = (Param("k", int, "minimum count", check=Interval(int, 1)),
          Param("seed", int, "unused", default=None),
          Param("notes", str, "unused: a file on the site's machine", default=None,
                site_path=True))


def _counts(dataset) -> Counter[str]:
    return Counter(code for s in dataset.code_sets() for code in s)


def _anonymize(threshold: bool):
    def run(dataset, params: dict[str, Any], rng) -> dict[str, bytes]:
        counts = _counts(dataset)
        kept = {c: n for c, n in sorted(counts.items()) if not threshold or n >= params["k"]}
        return {"counts.json": json.dumps(kept, sort_keys=True).encode()}
    return run


def _verify(files: dict[str, bytes], dataset, params: dict[str, Any]) -> VerificationReport:
    released = json.loads(files["counts.json"])
    truth = _counts(dataset)
    smallest = min(released.values(), default=params["k"])
    exact = all(truth.get(c) == n for c, n in released.items())
    return VerificationReport("code-counts", [
        Requirement("count threshold", f"every count ≥ {params['k']}",
                    f"smallest count {smallest}", smallest >= params["k"]),
        Requirement("truthful counts", "counts equal the original", "equal" if exact else
                    "differ", exact),
    ])


def _evaluate(files, dataset, params, rng) -> UtilityReport:
    released = json.loads(files["counts.json"])
    return UtilityReport("code-counts", {"codes kept": float(len(released)),
                                         "codes total": float(len(_counts(dataset)))})


COUNTS_SCHEMA = ReleaseSchema((FileSchema(
    "counts.json", "json", MapOf("int"), doc="patients per code (test double)",
    fields_doc={"*": "a count of at least k patients"}),))


def _attack_counts(files: dict[str, bytes], dataset, params: dict[str, Any]) -> AttackReport:
    """One known code narrows a patient to the patients counted under it."""
    released = json.loads(files["counts.json"])
    smallest = min(released.values(), default=None)
    return AttackReport("knows one code of the target", len(released), True, smallest,
                        params["k"], smallest is None or smallest >= params["k"])


def _count_codes(files: dict[str, bytes]) -> int:
    return len(json.loads(files["counts.json"]))


def _evaluate_useless(files, dataset, params, rng) -> UtilityReport:
    report = _evaluate(files, dataset, params, rng)
    return UtilityReport("code-counts", report.metrics,
                         below_baseline=["the counts are no better than publishing none "
                                         "(test double)"])


_COUNTS_PARTS = {"schema": COUNTS_SCHEMA, "attack": _attack_counts,
                 "count_records": _count_codes}
CODE_COUNTS = AlgorithmEntry("code-counts", "threshold code counts (test double)",
                             "every published count ≥ k", PARAMS, _anonymize(True), _verify,
                             _evaluate, **_COUNTS_PARTS)
LEAKY = AlgorithmEntry("leaky-code-counts", "unthresholded counts (test double)",
                       "every published count ≥ k", PARAMS, _anonymize(False), _verify,
                       _evaluate, **_COUNTS_PARTS)
# Verifies, but its evaluation finds it below a trivial baseline: refused unless allowed.
USELESS = AlgorithmEntry("useless-code-counts", "counts below a trivial baseline (test "
                         "double)", "every published count ≥ k", PARAMS, _anonymize(True),
                         _verify, _evaluate_useless, **_COUNTS_PARTS)


def _records(dataset, params: dict[str, Any], rng) -> dict[str, bytes]:
    lines = [json.dumps({"patient_id": pid, "codes": sorted(codes)}) + "\n"
             for pid, codes in zip(dataset.patient_ids, dataset.code_sets(), strict=True)]
    return {"records.jsonl": "".join(lines).encode()}


def _verify_records(files: dict[str, bytes], dataset, params: dict[str, Any]) -> VerificationReport:
    released = {r["patient_id"]: frozenset(r["codes"]) for r in
                map(json.loads, files["records.jsonl"].decode().splitlines())}
    truth = dict(zip(dataset.patient_ids, dataset.code_sets(), strict=True))
    return VerificationReport("patient-records", [
        Requirement("truthful records", "each record equals its patient's codes",
                    f"{sum(released.get(p) == c for p, c in truth.items())} of {len(truth)}",
                    released == truth)])


def _evaluate_records(files, dataset, params, rng) -> UtilityReport:
    return UtilityReport("patient-records", {"records": float(dataset.n_patients)})


RECORDS_SCHEMA = ReleaseSchema((FileSchema(
    "records.jsonl", "jsonl", Obj({"patient_id": "str", "codes": ListOf("str")}),
    doc="per-patient code sets (test double)"),))


def _attack_none(files: dict[str, bytes], dataset, params: dict[str, Any]) -> AttackReport:
    """The double promises no anonymity (threshold 1): any candidate set satisfies it."""
    return AttackReport("none (the double promises no anonymity)", 0, True, None, 1, True)


_RECORD_PARTS = {"schema": RECORDS_SCHEMA, "attack": _attack_none}
# Per-patient records keyed by patient_id: the flow must publish them under pseudonyms.
RECORDS = AlgorithmEntry("patient-records", "per-patient code sets (test double)",
                         "none: publishes codes as they are", PARAMS, _records,
                         _verify_records, _evaluate_records, id_file="records.jsonl",
                         **_RECORD_PARTS)
# The same records with id_file left undeclared: the flow cannot pseudonymize them, and
# the source-id check must then refuse the release.
UNDECLARED_IDS = AlgorithmEntry("undeclared-ids", "per-patient records, ids not declared "
                                "(test double)", "none", PARAMS, _records, _verify_records,
                                _evaluate_records, **_RECORD_PARTS)


def install(monkeypatch) -> None:
    """Make the doubles visible to ``registry.get`` for the duration of a test."""
    from ehr_release import registry

    real = dict(registry._entries())
    real.update({e.name: e for e in (CODE_COUNTS, LEAKY, USELESS, RECORDS, UNDECLARED_IDS)})
    monkeypatch.setattr(registry, "_entries", lambda: real)
