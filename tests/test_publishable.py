"""Issue 14: the attack audit is a flow stage, and a verified release must also be worth
publishing (not empty, not below a trivial baseline) unless the request waives it.

Run through ``release_flow`` with the code-counts doubles, so each refusal is checked where it
happens: no run reaches a reviewer, and a waiver is printed on the certificate.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ehr_release.model.reports import AttackReport
from ehr_release.storage import runs
from ehr_release.storage.audit import export_events
from ehr_release.storage.runs import Status
from tests import doubles
from tests.flow_helpers import copies_of, request_for, run_approved, start


def _failed_with(req) -> str:
    thread, box = start(req)
    thread.join(180)
    run = runs.get_run(req.run_id)
    assert run.status == Status.FAILED, (run.status, box)
    assert not (Path(req.out_dir) / "releases" / req.run_id).exists()
    return run.error or ""


def _pdf_text(path: Path) -> str:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) not installed")
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def test_empty_release_is_refused(env) -> None:
    data, out = env
    req = request_for(data, out)
    req = req.model_copy(update={"params": {"k": "100"}})  # no code held by 100 patients
    error = _failed_with(req)
    assert "no patient records" in error and "--allow-empty" in error


def test_empty_release_with_waiver_reaches_the_reviewer_flagged(env) -> None:
    data, out = env
    req = request_for(data, out, allow_empty=True)
    req = req.model_copy(update={"params": {"k": "100"}})
    box = run_approved(req)
    assert box.get("result") == "published", box
    draft = next(a for a in runs.list_artifacts(req.run_id) if a.kind == "certificate-draft")
    text = _pdf_text(Path(draft.path))
    assert "no patient records" in text and "--allow-empty" in text


def test_low_utility_is_refused_unless_allowed(env) -> None:
    data, out = env
    req = request_for(data, out, algorithm="useless-code-counts")
    error = _failed_with(req)
    assert "below a trivial baseline" in error and "--allow-low-utility" in error
    # The evaluation's sentence is measured on the original data (DiffGen: accuracy on the
    # true records): kept out of the run record, the audit trail and Prefect.
    sentence = "no better than publishing none"
    assert sentence not in error
    assert sentence not in export_events(req.run_id, "jsonl")
    assert copies_of(sentence, [Path(os.environ["PREFECT_HOME"])]) == []
    assert sentence in str(runs.latest_utility(req.run_id))  # the dashboard's copy

    allowed = request_for(data, out, algorithm="useless-code-counts", allow_low_utility=True)
    assert run_approved(allowed).get("result") == "published"


def test_a_failed_attack_stops_the_run_before_any_reviewer(env, monkeypatch) -> None:
    from ehr_release import registry

    def attack(files, dataset, params):
        return AttackReport("knows one code of the target", 3, True, 1, params["k"], False)

    table = dict(registry._entries())
    table["code-counts"] = dataclasses.replace(doubles.CODE_COUNTS, attack=attack)
    monkeypatch.setattr(registry, "_entries", lambda: table)
    data, out = env
    req = request_for(data, out)
    error = _failed_with(req)
    assert "attack audit" in error
    verification = runs.latest_verification(req.run_id)
    assert verification is not None and not verification["holds"]
    assert [r["name"] for r in verification["requirements"] if not r["passed"]] == \
        ["attack audit"]


def test_an_attack_that_crashes_fails_closed_without_quoting_values(env, monkeypatch) -> None:
    from ehr_release import registry

    def attack(files, dataset, params):
        raise KeyError("MRN-0042")

    table = dict(registry._entries())
    table["code-counts"] = dataclasses.replace(doubles.CODE_COUNTS, attack=attack)
    monkeypatch.setattr(registry, "_entries", lambda: table)
    data, out = env
    req = request_for(data, out)
    error = _failed_with(req)
    # Stored: the failed requirement's name (the crash's type is in the measured text,
    # which stored copies withhold like any failed requirement's).
    assert "attack audit" in error and "MRN-0042" not in error
    stored = runs.latest_verification(req.run_id)
    assert [r["name"] for r in stored["requirements"] if not r["passed"]] == ["attack audit"]
    assert "MRN-0042" not in str(stored)


def test_no_attack_registered_fails_closed(env, monkeypatch) -> None:
    from ehr_release import registry

    table = dict(registry._entries())
    table["code-counts"] = dataclasses.replace(doubles.CODE_COUNTS, attack=None)
    monkeypatch.setattr(registry, "_entries", lambda: table)
    data, out = env
    req = request_for(data, out)
    assert "did not hold: attack audit" in _failed_with(req)
    stored = runs.latest_verification(req.run_id)
    attack = next(r for r in stored["requirements"] if r["name"] == "attack audit")
    assert not attack["passed"] and attack["evidence"]["knowledge_sets_tried"] == 0


def test_datasheet_goes_out_and_says_so_certificate_stays_in(env) -> None:
    data, out = env
    req = request_for(data, out, recipient="Dr. Ada Lovelace, Cohort Study 12",
                      purpose="diabetes comorbidity", terms="no linkage; delete by 2027-12",
                      expires="2099-12-31")
    assert run_approved(req).get("result") == "published"
    folder = out / "releases" / req.run_id
    sheet = _pdf_text(folder / "datasheet.pdf")
    assert "goes with the data" in sheet
    for public in ("Dr. Ada Lovelace", "diabetes comorbidity", "no linkage", "counts.json",
                   "closed world", "attack audit"):
        assert public in sheet, public
    # Its first page says what it is, the guarantee in words, the terms and the expiry, and
    # the software that made it (issue 16).
    first = sheet.split("\f")[0]
    for plain in ("In plain words", "What you receive", "Guarantee", "Delete the data by",
                  "2099-12-31", "delete every copy by 2099-12-31", "no linkage",
                  "ehr_release", "commit"):
        assert plain in first, plain
    # Figures measured on the original data stay on the internal certificate.
    for internal in ("smallest count", "codes kept", "codes total", "candidate set"):
        assert internal not in sheet, internal
    filed = next(a for a in runs.list_artifacts(req.run_id) if a.kind == "certificate")
    certificate = _pdf_text(Path(filed.path))
    assert "does not leave with the data" in certificate
    assert "smallest count" in certificate and "Dr. Ada Lovelace" in certificate
    assert "Attack audit" in certificate
    assert "2099-12-31" in certificate.split("\f")[0]  # the parked bundle kept the expiry

