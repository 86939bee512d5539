"""Issue 33 items 1 and 2: governance the database cannot forge.

Item 1: an insider with database access set ``release_runs.requester`` of their own run to
another name (and their own ``users.role`` to reviewer), approved it, got it published and put
the columns back; ``audit verify`` said "all intact". Decisions now take the requester and
roles from the chain, and ``audit verify`` re-derives those columns and applies the four-eyes
rule to the chain itself.

Item 2: heads were anchored only at run-status changes, so every later event could be deleted
unnoticed, and a deleted head file was not reported. Every commit is anchored now, a keyed
chain without (or beyond) its head file fails, and a second anchor place outside the home can
be configured.

All run on SQLite and PostgreSQL (``db_url`` / ``any_db``).
"""

from __future__ import annotations

import syslog
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from sqlalchemy import text
from sqlmodel import Session

from ehr_release.core.errors import ApprovalError
from ehr_release.governance.identity import cli_identity
from ehr_release.governance.integrity import check_integrity
from ehr_release.storage import runs, users
from ehr_release.storage.anchors import (
    ANCHOR_DIR_ENV,
    ANCHOR_SYSLOG_ENV,
    HEADS_FILE,
    read_anchors,
)
from ehr_release.storage.audit import AUDIT_KEY_ENV, chain_head, record_event
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import Approval, DatasetRecord, User
from ehr_release.storage.runs import Status

TO_AWAITING = [Status.ANONYMIZED, Status.VERIFIED, Status.EVALUATED, Status.CERTIFIED,
               Status.AWAITING_APPROVAL]


@pytest.fixture(autouse=True)
def _file_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(AUDIT_KEY_ENV, raising=False)
    monkeypatch.delenv("EHR_RELEASE_AUDIT_RETIRED_KEYS", raising=False)
    monkeypatch.delenv(ANCHOR_DIR_ENV, raising=False)
    monkeypatch.delenv(ANCHOR_SYSLOG_ENV, raising=False)
    monkeypatch.delenv("EHR_RELEASE_CREDENTIAL", raising=False)


def _run(engine, out: Path, requester: str = "alice") -> str:
    ds = DatasetRecord(fingerprint="ab" * 32, rows=10, codes=30, columns_json="{}", source="x")
    run = runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester=requester,
                          algorithm="code-counts", parameters={"k": "2"}, out_dir=str(out),
                          engine=engine)
    for status in TO_AWAITING:
        runs.transition(run.id, status, actor="flow", engine=engine)
    return run.id


def _sql(engine, statement: str, **params: object) -> None:
    with Session(engine) as s:
        s.exec(text(statement).bindparams(**params))
        s.commit()


def _problems(engine) -> str:
    problems, summary = check_integrity(engine)
    return "\n".join(problems) or summary


# ============================================================================ item 1
def test_a_decision_takes_the_requester_from_the_chain_not_the_column(db_url, tmp_path):
    """The issue's move: the steward renames the requester of her own run, then decides it."""
    engine = get_engine(db_url)
    run_id = _run(engine, tmp_path, requester="alice")
    _sql(engine, "UPDATE release_runs SET requester = 'carol' WHERE id = :r", r=run_id)
    with pytest.raises(ApprovalError, match="requested this run"):
        runs.decide(run_id, reviewer="alice", decision="approve", reason="mine",
                    engine=engine)
    assert runs.get_run(run_id, engine).status == Status.AWAITING_APPROVAL
    assert runs.get_approval(run_id, engine) is None
    # … and the edited column is reported on its own
    assert (f"{run_id}: run requester is 'carol' in the database but the audit chain "
            "recorded 'alice'") in _problems(engine)


def test_a_run_without_an_authentic_request_event_cannot_be_decided(db_url, tmp_path):
    engine = get_engine(db_url)
    run_id = _run(engine, tmp_path, requester="alice")
    _sql(engine, "UPDATE audit_events SET actor = 'carol' WHERE run_id = :r "
                 "AND action = 'run.requested'", r=run_id)
    with pytest.raises(ApprovalError, match="no authentic run.requested event"):
        runs.decide(run_id, reviewer="alice", decision="approve", reason="mine",
                    engine=engine)


def test_a_role_edited_in_the_table_does_not_make_a_reviewer(any_db, monkeypatch):
    alice = users.add_user("alice", "steward")
    monkeypatch.setenv("EHR_RELEASE_CREDENTIAL", alice)  # no terminal: the variable
    users.add_user("bob", "reviewer")
    engine = get_engine()
    _sql(engine, "UPDATE users SET role = 'reviewer' WHERE name = 'alice'")
    assert users.authenticate("alice", alice, client="t").role == "steward"
    with pytest.raises(users.AuthError, match="is a steward; this needs a reviewer"):
        cli_identity("alice", "reviewer")
    assert ("user 'alice' has role 'reviewer' in the database but the audit chain recorded "
            "'steward'") in _problems(engine)


def test_a_role_changed_through_the_chain_counts(any_db, monkeypatch):
    alice = users.add_user("alice", "steward")
    users.set_role("alice", "reviewer")
    monkeypatch.setenv("EHR_RELEASE_CREDENTIAL", alice)  # no terminal: the variable
    assert cli_identity("alice", "reviewer").role == "reviewer"
    assert check_integrity(get_engine())[0] == []


def test_a_user_row_inserted_behind_the_chain_signs_nobody_in(any_db):
    users.add_user("bob", "reviewer")
    mine = "mallory-knows-this"
    engine = get_engine()
    with Session(engine) as s:
        s.add(User(name="mallory", role="reviewer", credential_hash=PasswordHasher().hash(mine)))
        s.commit()
    with pytest.raises(users.AuthError):
        users.authenticate("mallory", mine, client="t")
    assert "user 'mallory' is in users but the audit chain never added them" in \
        _problems(engine)


def test_a_credential_swapped_in_the_table_signs_nobody_in(any_db):
    users.add_user("bob", "reviewer")
    mine = "mallory-knows-this"
    engine = get_engine()
    _sql(engine, "UPDATE users SET credential_hash = :h WHERE name = 'bob'",
         h=PasswordHasher().hash(mine))
    with pytest.raises(users.AuthError):
        users.authenticate("bob", mine, client="t")
    assert "user 'bob': the stored credential is not the one the audit chain recorded" in \
        _problems(engine)


def test_deleting_every_user_row_does_not_make_a_single_user_site(any_db):
    users.add_user("bob", "reviewer")
    _sql(get_engine(), "DELETE FROM users")
    assert users.any_users()
    with pytest.raises(users.AuthError, match="this site has registered users"):
        cli_identity("bob", "reviewer")


def test_the_whole_attack_leaves_a_chain_that_audit_verify_refuses(db_url, tmp_path):
    """Columns edited, the self-approval recorded (as the old code let it through), the
    columns put back: the chain itself shows one person requesting and approving."""
    engine = get_engine(db_url)
    run_id = _run(engine, tmp_path, requester="alice")
    assert check_integrity(engine)[0] == []
    with Session(engine) as s:  # what runs.decide recorded when it read the edited column
        runs.apply_transition(s, run_id, Status.APPROVED, actor="alice",
                              payload={"decision": "approve", "reason": "fine",
                                       "channel": "cli", "role": "reviewer"})
        s.add(Approval(run_id=run_id, reviewer="alice", decision="approve", reason="fine"))
        s.commit()
    found = _problems(engine)
    assert (f"{run_id}: four-eyes rule broken: 'alice' requested the run (event 1) and "
            "'alice' decided it") in found


def test_edited_algorithm_or_parameters_are_reported(db_url, tmp_path):
    engine = get_engine(db_url)
    run_id = _run(engine, tmp_path)
    _sql(engine, "UPDATE release_runs SET algorithm = 'other', parameters_json = :p "
                 "WHERE id = :r", p='{"k":"1"}', r=run_id)
    found = _problems(engine)
    assert f"{run_id}: run algorithm is 'other' in the database" in found
    assert f"{run_id}: run parameters is {{'k': '1'}} in the database" in found


# ============================================================================ item 2
def test_every_event_is_anchored_so_deleting_a_late_refusal_is_caught(db_url, tmp_path):
    """``approval.refused`` came after the last status anchor and could be deleted."""
    engine = get_engine(db_url)
    _run(engine, tmp_path, requester="alice")
    with pytest.raises(ApprovalError):
        runs.decide(runs.list_runs(engine=engine)[0].id, reviewer="alice",
                    decision="approve", reason="mine", engine=engine)
    record_event(actor="system:users", action="user.added",
                 payload={"name": "x", "role": "auditor"}, engine=engine)
    assert chain_head(engine)[1] == 8
    assert [a.seq for a in read_anchors(engine)] == list(range(1, 9))
    _sql(engine, "DELETE FROM audit_events WHERE seq > 6")
    assert ("audit chain truncated: it ends at event 6 but the head file recorded event 8"
            in _problems(engine))


def test_a_keyed_chain_without_its_head_file_fails(db_url, tmp_path, ehr_home):
    engine = get_engine(db_url)
    _run(engine, tmp_path)
    (ehr_home / HEADS_FILE).unlink()
    found = _problems(engine)
    assert f"audit head file {ehr_home / HEADS_FILE} is missing" in found


def test_the_issues_deleted_pending_run_is_caught(db_url, tmp_path, ehr_home):
    """Head file deleted, then a whole pending run (its events and rows) removed: before,
    "all intact, anchors checked: 0"."""
    engine = get_engine(db_url)
    _run(engine, tmp_path / "a")
    first = chain_head(engine)[1]
    victim = _run(engine, tmp_path / "b")
    (ehr_home / HEADS_FILE).unlink()
    _sql(engine, "DELETE FROM audit_events WHERE seq > :n", n=first)
    _sql(engine, "DELETE FROM release_runs WHERE id = :r", r=victim)
    problems, summary = check_integrity(engine)
    assert problems and "all intact" not in summary
    assert any("is missing" in p for p in problems)


def test_a_shortened_head_file_fails(db_url, tmp_path, ehr_home):
    engine = get_engine(db_url)
    _run(engine, tmp_path)
    heads = ehr_home / HEADS_FILE
    lines = heads.read_text().splitlines(keepends=True)
    heads.write_text("".join(lines[:-2]))
    assert (f"audit head file {heads} ends at event 4 but the chain has 6: 2 newest "
            "event(s) are anchored nowhere") in _problems(engine)


def test_a_second_anchor_place_catches_what_the_home_hides(db_url, tmp_path, ehr_home,
                                                            monkeypatch):
    """An attacker with the database *and* the home deletes the newest events and trims the
    home's head file to match; the site's second place still has them."""
    offsite = tmp_path / "offsite"
    offsite.mkdir()
    monkeypatch.setenv(ANCHOR_DIR_ENV, str(offsite))
    engine = get_engine(db_url)
    _run(engine, tmp_path)
    assert (offsite / HEADS_FILE).read_text() == (ehr_home / HEADS_FILE).read_text()
    assert check_integrity(engine)[0] == []
    _sql(engine, "DELETE FROM audit_events WHERE seq > 4")
    heads = ehr_home / HEADS_FILE
    heads.write_text("".join(heads.read_text().splitlines(keepends=True)[:4]))
    found = _problems(engine)
    assert "audit chain truncated: it ends at event 4 but the head file recorded event 6" \
        in found


def test_a_missing_second_anchor_file_fails(db_url, tmp_path, monkeypatch):
    offsite = tmp_path / "offsite"
    offsite.mkdir()
    monkeypatch.setenv(ANCHOR_DIR_ENV, str(offsite))
    engine = get_engine(db_url)
    _run(engine, tmp_path)
    (offsite / HEADS_FILE).unlink()
    assert f"audit head file {offsite / HEADS_FILE} is missing" in _problems(engine)


def test_head_lines_can_go_to_syslog(db_url, monkeypatch):
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(syslog, "syslog", lambda priority, message: sent.append(
        (priority, message)))
    monkeypatch.setenv(ANCHOR_SYSLOG_ENV, "1")
    engine = get_engine(db_url)
    ev = record_event(actor="t", action="test.event", engine=engine)
    assert len(sent) == 1
    priority, message = sent[0]
    assert priority == syslog.LOG_AUTH | syslog.LOG_INFO
    assert message.startswith(f"ehr-release audit-head {ev.seq} {ev.hash} ")


def test_a_status_and_approvals_row_set_by_hand_publish_nothing(any_db, tmp_path):
    """Publishing is a decision too: it asks the chain whether the run was approved."""
    from ehr_release.core.errors import IllegalTransition
    from ehr_release.model.reports import Requirement, UtilityReport, VerificationReport
    from ehr_release.tasks.publish import publish_release

    engine = get_engine()
    run_id = _run(engine, tmp_path / "out", requester="alice")
    _sql(engine, "UPDATE release_runs SET status = 'approved' WHERE id = :r", r=run_id)
    with Session(engine) as s:
        s.add(Approval(run_id=run_id, reviewer="bob", decision="approve", reason="fine"))
        s.commit()
    holds = VerificationReport("code-counts", [Requirement("r", "x", "x", True)])
    with pytest.raises(IllegalTransition, match="the audit chain records no approval"):
        publish_release(run_id, {}, holds, UtilityReport("code-counts", {}), "flow")
    assert not (tmp_path / "out" / "releases" / run_id).exists()
