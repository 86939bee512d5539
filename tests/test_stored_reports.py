"""Every copy of a verification or attack report that leaves the process carries no value of
the data (privacy audit, issue 18): the run record's verification table (dashboard), the
Prefect artifacts, the parked bundle and the certificate get ``stored()`` copies. The terminal
(``ehr-release verify``, a failed run's own output) keeps what the verifier measured.

Each family's verifier quotes the data where a requirement fails — a class's demographics and
codes (k, k^m), a lone trajectory (LDA), an original itemset and its true counts
(disassociation) — and DiffGen's residual test and attack are measured on the true counts,
which a differentially private release does not cover even when they held.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ehr_release.model.reports import (
    WITHHELD_FAILED,
    WITHHELD_ORIGINAL,
    AttackReport,
    ReleaseOutcome,
    Requirement,
    UtilityReport,
    VerificationReport,
)
from ehr_release.planning.request import DataUse
from ehr_release.privacy.attacks import diffgen as diffgen_attack
from ehr_release.privacy.disassociation import check_km
from ehr_release.privacy.lda import check_trajectories
from ehr_release.release import bundle
from ehr_release.release.verification import verify_release
from ehr_release.storage import pending, runs
from ehr_release.storage.models import DatasetRecord
from ehr_release.tasks import algorithm_stages
from ehr_release.tasks.algorithm_stages import attack_markdown, verification_markdown
from tests.test_diffgen_verifier import release  # noqa: F401 - a fixture
from tests.test_disassociation_verifier import (
    _files,
    _requirement,
    planted_code_report,
    read_doc,
    sample,  # noqa: F401 - a fixture
)
from tests.test_failed_verification_stored import _quotes_a_record, _unanonymized
from tests.test_lda_verifier import TOY, TOY_SETTINGS, X, Y, toy_release, with_records


def _run(run_id: str, algorithm: str) -> None:
    ds = DatasetRecord(fingerprint="ab" * 32, rows=4, codes=4, columns_json="{}", source="x")
    runs.create_run(run_id=run_id, dataset=ds, requester="sam", algorithm=algorithm,
                    parameters={}, out_dir="/tmp")


# --------------------------------------------------------------------------- the rule
def test_a_stored_copy_keeps_verdicts_and_counts_only() -> None:
    report = VerificationReport("x", [
        Requirement("held", "≥ 2", "smallest 3", True, {"smallest": 3, "ids": ["p1"],
                                                        "where": "C1", "caps": {"a": 1}}),
        Requirement("failed", "≥ 2", "class ([19, 19], Male) of 1", False,
                    {"smallest": 1, "itemset": ["493.2"]}),
        Requirement("dp", "noisy", "3 of 9 counts exact", True, {"small": 3},
                    on_original=True)])
    stored = report.stored()
    assert [(r.name, r.required, r.passed) for r in stored.requirements] == [
        (r.name, r.required, r.passed) for r in report.requirements]
    assert stored.holds == report.holds and [r.name for r in stored.failures] == ["failed"]
    assert [(r.measured, r.evidence) for r in stored.requirements] == [
        ("smallest 3", {"smallest": 3}), (f"{WITHHELD_FAILED}; smallest 1", {"smallest": 1}),
        (WITHHELD_ORIGINAL, {})]
    assert stored.stored() == stored
    assert report.requirements[1].measured == "class ([19, 19], Male) of 1"  # the terminal's


def test_an_attack_keeps_its_counts_and_loses_what_it_measured_on_failure() -> None:
    attack = AttackReport("knows 2 codes", 10, True, 1, 2, False, measured="side channel: x")
    stored = attack.stored()
    assert (stored.smallest_candidate_set, stored.passed, stored.measured) == (
        1, False, WITHHELD_FAILED)
    passed = AttackReport("knows 2 codes", 10, True, 5, 2, True, measured="smallest 5")
    assert passed.stored() == passed


# --------------------------------------------------------------------------- (k, k^m)
def test_the_verify_stage_stores_and_shows_no_record(tmp_path: Path, ehr_home,
                                                     monkeypatch) -> None:
    """A faulty anonymizer published every record as it is: the run record and the Prefect
    artifact name the failed requirements, never a class's demographics or codes."""
    entry, files, dataset, params = _unanonymized(tmp_path)
    shown: list[str] = []
    monkeypatch.setattr(algorithm_stages, "stage_artifact", lambda _s, _r, md: shown.append(md))
    _run("run-kkm", entry.name)
    plan = SimpleNamespace(run_id="run-kkm", entry=entry, dataset=dataset,
                           stage_params=lambda: params)
    report = algorithm_stages.verify_task.fn(plan, files)
    assert not report.holds and _quotes_a_record(str(report.to_dict()))  # the terminal's
    stored = runs.latest_verification("run-kkm")
    assert stored["holds"] is False
    assert "(k, k^m)-anonymity" in {r["name"] for r in stored["requirements"]}
    assert not _quotes_a_record(json.dumps(stored, ensure_ascii=False)), stored
    assert shown and not _quotes_a_record(shown[0]), shown[0]
    assert "(k, k^m)-anonymity" in shown[0] and WITHHELD_FAILED in shown[0]


def test_the_parked_bundle_holds_the_stored_copies(tmp_path: Path, ehr_home) -> None:
    """The reviewer's dashboard and the final certificate read the parked reports."""
    entry, files, dataset, params = _unanonymized(tmp_path)
    report = verify_release(entry, files, dataset, params, None)
    _run("run-park", entry.name)
    attack = AttackReport("knows 2 codes", 10, True, 1, 2, False, measured="row of (493.2)")
    bundle.park("run-park", files, report, UtilityReport(entry.name, {}),
                ReleaseOutcome(records=7, attack=attack), DataUse(), 3600)
    row = pending.get_pending("run-park")
    assert not _quotes_a_record(row.verification_json + row.outcome_json)
    assert json.loads(row.outcome_json)["attack"]["measured"] == WITHHELD_FAILED


# --------------------------------------------------------------------------- LDA
def test_a_lone_trajectory_is_not_stored() -> None:
    """Trajectories published as they are: groups of one, each a patient's trajectory."""
    lone = [{"patient_id": pid, "trajectory": [[code, [age, age]] for code, age in traj]}
            for pid, traj in (("x", X), ("y", Y))]
    report = check_trajectories(with_records(toy_release(), lone), ["x", "y"], [X, Y], TOY,
                                TOY_SETTINGS)
    k_req = next(r for r in report.requirements if r.name == "k-anonymity")
    assert not k_req.passed and "401.1" in k_req.measured  # the terminal's
    stored = json.dumps(report.stored().to_dict())
    assert "401.1" not in stored and "small_groups" not in stored, stored


def test_a_k_anonymous_trajectory_is_counted_not_quoted() -> None:
    report = check_trajectories(toy_release(), ["x", "y"], [X, Y], TOY, TOY_SETTINGS)
    k_req = next(r for r in report.requirements if r.name == "k-anonymity")
    assert k_req.passed and "401" not in k_req.measured, k_req.measured


# --------------------------------------------------------------------------- disassociation
def test_an_original_itemset_is_not_quoted_where_it_held(sample) -> None:  # noqa: F811
    result, dataset = sample
    report = check_km(_files(read_doc(result.release.to_bytes())), dataset, 3, 2)
    assert report.holds
    codes = {c for cs in dataset.code_sets() for c in cs}
    for name in ("Guarantee 1", "chunk k^m-anonymity"):
        measured = _requirement(report, name).measured
        assert not any(c in measured for c in codes), measured
    stored = json.dumps(report.stored().to_dict())
    assert not any(f'"{c}"' in stored for c in codes), stored


def test_a_failed_chunk_and_its_true_counts_are_not_stored(sample) -> None:  # noqa: F811
    report = planted_code_report(sample)
    truth = _requirement(report, "truthfulness")
    assert not truth.passed and "original has" in truth.measured  # the terminal's
    stored = json.dumps(report.stored().to_dict())
    assert "999.9" not in stored and "original has" not in stored, stored


# --------------------------------------------------------------------------- DiffGen
def test_what_diffgen_measured_on_the_true_counts_is_not_stored(release) -> None:  # noqa: F811
    files, data, params = release
    from ehr_release.privacy import diffgen as verifier

    report = verifier.verify(files, data, params)
    assert report.holds
    stored = {r.name: r for r in report.stored().requirements}
    for name in ("counts noisy", "domains cover the data"):
        assert (stored[name].measured, stored[name].evidence) == (WITHHELD_ORIGINAL, {})
    attack = diffgen_attack.attack(files, data, params)
    assert "counts exact" in attack.measured  # the terminal's
    shown = attack_markdown(attack)
    assert "counts exact" not in shown and WITHHELD_ORIGINAL in shown
    table = verification_markdown(report)
    assert "of the true count" not in table and "records inside" not in table


def test_diffgen_utility_figures_stay_out_of_prefect(release) -> None:  # noqa: F811
    """Computed on the true counts and test records, which ε does not cover; a k-anonymous
    family's figures (aggregates over its release) are shown."""
    from ehr_release.registry import get as get_algorithm
    from ehr_release.tasks.algorithm_stages import WITHHELD_UTILITY, utility_markdown

    files, data, params = release
    entry = get_algorithm("diffgen")
    report = entry.evaluate(files, data, {**params, "eval_runs": 0},
                            np.random.default_rng(0))
    figure = f"{report.metrics['count error: mean absolute']:.6g}"
    shown = utility_markdown(report, entry.differentially_private)
    assert "count error: mean absolute" in shown and WITHHELD_UTILITY in shown
    assert f"| {figure} |" not in shown
    assert f"| {figure} |" in utility_markdown(report, False)


def test_stored_evidence_names_no_patient() -> None:
    """Ids (pseudonyms or source ids) a verifier lists are not stored, only their count."""
    req = Requirement("k-map", "≥ 2", "smallest distinguishability 1; 2 records below 2",
                      False, {"patients": ["p1", "p2"], "population_size": 40})
    assert req.stored().evidence == {"population_size": 40}


def test_the_certificate_is_built_from_the_stored_copies(tmp_path: Path, ehr_home) -> None:
    """The internal certificate is a file on disk: what it prints is the stored copy."""
    from ehr_release.tasks.certify import build_context

    entry, files, dataset, params = _unanonymized(tmp_path)
    report = verify_release(entry, files, dataset, params, None)
    _run("run-cert", entry.name)
    attack = AttackReport("knows 2 codes", 10, True, None, 0, True, measured="3 of 9 exact",
                          on_original=True)
    ctx = build_context("run-cert", files, report, UtilityReport(entry.name, {}), params={},
                        status="verified", outcome=ReleaseOutcome(records=7, attack=attack))
    assert ctx.verification == report.stored() and ctx.outcome.attack == attack.stored()
    assert not _quotes_a_record(str(ctx.verification))
