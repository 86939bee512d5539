"""What the certificate, datasheet and dashboard claim for an ε-DP (DiffGen) release.

DiffGen's attack audit counts no candidate sets (threshold 0, smallest set None): it checks
that the published counts carry the promised noise and that nothing else follows the data.
It used to be worded as for k-anonymity -- the recipient's datasheet said it "did not single
out any patient below the guarantee's threshold" (ε-DP has no threshold), the certificate
that it "tried N background-knowledge sets (every one)" (they were counts), the dashboard
that it "failed to single anyone out" -- and the verification's PASSED did not say that the
draws themselves (selections, noise, randomness) cannot be checked from the bytes.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from ehr_release.dashboard.summary import plain_summary
from ehr_release.documents.certificate import CertificateContext, summary
from ehr_release.documents.datasheet import DatasheetContext, render_datasheet_html
from ehr_release.model.reports import (
    AttackReport,
    ReleaseOutcome,
    Requirement,
    UtilityReport,
    VerificationReport,
)
from ehr_release.planning.request import DataUse
from ehr_release.storage import runs
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import DatasetRecord
from ehr_release.storage.pending import PendingRelease

ATTACK = AttackReport(
    attacker_model="an adversary holding the whole extract compares every published count",
    knowledge_sets_tried=40, exhaustive=True, smallest_candidate_set=None, threshold=0,
    passed=True, measured="3 of 40 counts exact", on_original=True,
    required="no more exact counts than discrete Laplace noise at the ledger's ε allows")
VERIFIED = VerificationReport("diffgen", [Requirement("ε composition", "≤ ε", "1", True)])
OVERCLAIMS = ("threshold", "single out", "singled out", "single anyone", "background-knowledge")


def _diffgen_run(engine) -> str:
    ds = DatasetRecord(fingerprint="ef" * 32, rows=10, codes=0, columns_json="{}", source="x")
    return runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester="steward",
                           algorithm="diffgen", parameters={"epsilon": "1", "h": "2",
                                                            "taxonomies": "adult"},
                           out_dir="/tmp", engine=engine).id


def test_the_datasheet_does_not_describe_the_dp_audit_as_a_threshold_attack(any_db):
    from ehr_release.tasks.certify import build_datasheet

    run_id = _diffgen_run(get_engine(any_db))
    sheet = build_datasheet(run_id, {}, VERIFIED, ReleaseOutcome(None, ATTACK), None,
                            params={"epsilon": 1.0, "h": 2})
    html = render_datasheet_html(sheet)
    assert not [w for w in OVERCLAIMS if w in html]
    assert "cannot prove the guarantee" in html
    assert "cannot be seen in the bytes" in html  # what the verifier's PASSED covers


def test_a_dp_record_count_reads_as_the_sum_of_noisy_counts(any_db):
    """DiffGen's record count is the sum of its noisy counts: inside ε, but not the true
    number of records, and the recipient must not take it for one."""
    from ehr_release.tasks.certify import build_datasheet

    run_id = _diffgen_run(get_engine(any_db))
    sheet = build_datasheet(run_id, {}, VERIFIED, ReleaseOutcome(1234, ATTACK), None,
                            params={"epsilon": 1.0, "h": 2})
    assert "1,234 patient records by the sum of its noisy counts" in render_datasheet_html(sheet)
    k_anonymous = DatasheetContext(
        run_id="rel-2", algorithm="disassociation", privacy_model="k^m", parameters={},
        files=[], records=1234, checks_passed=[], attacker_model=None, data_use=DataUse(),
        approved_at=None, audit_head="0" * 64)
    assert "1,234 patient records." in render_datasheet_html(k_anonymous)


def test_the_certificate_summary_says_what_the_dp_checks_cover():
    ctx = CertificateContext(
        run_id="rel-1", created_at=datetime(2026, 11, 27, tzinfo=UTC), requester="sam",
        dataset_source="x", dataset_fingerprint="0" * 64, dataset_rows=10,
        dataset_schema={}, algorithm="diffgen", algorithm_summary="DiffGen",
        privacy_model="ε-DP", parameters={"epsilon": 1.0, "h": 2},
        verification=VERIFIED.stored(), utility=UtilityReport("diffgen", {}), manifest=[],
        approval=None, audit_head="0" * 64, audit_events=1, status="draft",
        outcome=ReleaseOutcome(None, ATTACK).stored())
    first = summary(ctx)
    assert first.attack is not None and first.attack.passed
    assert not [w for w in OVERCLAIMS if w in first.attack.detail]
    assert "not prove the guarantee" in first.attack.detail
    assert "cannot be seen in the bytes" in first.verification.detail
    # the noise check reads the true counts: publishing only draws that pass it adds δ
    assert "δ ≤ 10⁻⁶" in first.verification.detail
    assert "noisy counts" in summary(replace(ctx, outcome=ReleaseOutcome(7, ATTACK))).records


def test_the_dashboard_says_what_the_dp_audit_is(any_db):
    engine = get_engine(any_db)
    run = runs.get_run(_diffgen_run(engine), engine)
    bundle = PendingRelease(run_id=run.id, candidate_dir="/tmp", verification_json="{}",
                            utility_json="{}", data_use_json="{}", expires_at="",
                            outcome_json=json.dumps({"records": 5,
                                                     "attack": ATTACK.stored().to_dict()}))
    lines = plain_summary(run, VERIFIED.to_dict(), None, bundle)
    (attack,) = [x for x in lines if x.label == "Attack audit"]
    assert not [w for w in OVERCLAIMS if w in attack.text]
    (account,) = [x for x in lines if x.label == "ε of this extract"]
    assert "0 other differentially private runs" in account.text
