"""A failed verification is stored without what the verifier measured (privacy audit, issue
18): on a release that failed, the measured text quotes what failed — here a (k, k^m) class
of one record with its exact demographics and codes, i.e. one patient's record — and the
run record, the audit trail, Prefect's state and the comparison report must not hold it.
The steward's terminal still gets it."""

from __future__ import annotations

from pathlib import Path

import yaml

from ehr_release import registry
from ehr_release.comparison.compare import Candidate
from ehr_release.core.errors import stored_error
from ehr_release.flows import compare
from ehr_release.flows.release import VerificationFailed, _require
from ehr_release.release.verification import verify_release
from ehr_release.tasks.redaction import redact
from tests.kkm_release import to_files
from tests.test_artuc_worked_example import CONFIG, ROWS, worked_example

#: Each worked-example patient's exact demographics, as the kkm verifier shows a class.
CLASSES = [f"([{age}, {age}], {gender}, {origin})" for age, origin, gender, _ in ROWS]
CODES = {c for *_, codes in ROWS for c in codes.split()}


def _quotes_a_record(text: str) -> bool:
    return any(c in text for c in CLASSES) or any(f"({c})" in text for c in CODES)


def _unanonymized(tmp_path: Path):
    """A faulty anonymizer's (k, k^m) release: every record published as it is."""
    dataset, _ = worked_example()
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    entry = registry.get("artuc")
    params = entry.parse({"k": "2", "m": "2", "delta": "0.6", "epsilon": "2",
                          "config": str(path)})
    records = [{"cluster": f"C{i}",
                "demographics": {"age": [age, age], "gender": gender, "origin": origin},
                "codes": [[c] for c in codes.split()]}
               for i, (age, origin, gender, codes) in enumerate(ROWS, 1)]
    return entry, to_files(records, canonical=True), dataset, params


def test_the_stored_failure_names_requirements_not_the_record(tmp_path: Path) -> None:
    entry, files, dataset, params = _unanonymized(tmp_path)
    report = verify_release(entry, files, dataset, params, None)
    assert not report.holds
    try:
        _require(report)
    except VerificationFailed as exc:
        failure = exc
    assert _quotes_a_record(str(failure))  # the terminal's text
    for stored in (stored_error(failure), str(redact(failure))):
        assert "(k, k^m)-anonymity" in stored
        assert not _quotes_a_record(stored), stored


def test_a_comparison_row_names_requirements_not_the_record(tmp_path: Path,
                                                             monkeypatch) -> None:
    entry, files, dataset, _ = _unanonymized(tmp_path)
    config = tmp_path / "config.yaml"
    monkeypatch.setattr(compare, "anonymize_as_released", lambda *a, **k: files)
    candidate = Candidate(0, "artuc", {"k": "2", "m": "2", "delta": "0.6", "epsilon": "2",
                                       "config": str(config), "compare": "false"})
    outcome = compare.candidate_task.fn(candidate, dataset, None, "cmp", None)
    assert not outcome.verified and "(k, k^m)-anonymity" in outcome.failures
    assert not any(_quotes_a_record(f) for f in outcome.failures), outcome.failures
