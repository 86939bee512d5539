"""Issue 17 part 4: the storage conventions — named audit actions and decisions, one way to
join a transaction, canonical JSON in one place, the shared base of the result tables.

The database tests run on SQLite and PostgreSQL (``db_url``).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlmodel import Session, select

from ehr_release.core.canonical import canonical_json
from ehr_release.storage import runs
from ehr_release.storage.actions import AuditAction, Decision, download_action, status_action
from ehr_release.storage.audit import append_event, iter_events, record_event, verify_chain
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import (
    Approval,
    ArtifactRecord,
    RunRecordBase,
    RunReportBase,
    UtilityResult,
    VerificationResult,
)
from ehr_release.storage.runs import Status
from tests.test_storage import make_run, to_awaiting


# --------------------------------------------------------------------------- names
def test_every_status_has_its_event_with_the_historical_text():
    """Stored actions must stay the strings written before the enum existed."""
    for status in Status:
        action = status_action(status)
        assert action == f"run.{status.value}" and isinstance(action, str)
    with pytest.raises(ValueError):
        status_action("no-such-status")


def test_actions_and_decisions_are_their_strings():
    assert AuditAction.AUDIT_KEY_ROTATED == "audit.key_rotated"
    assert download_action("certificate") == "certificate.downloaded"
    assert {str(d) for d in Decision} == {"approve", "reject"}
    assert "approve" in runs.DECISIONS and "Approve" not in runs.DECISIONS
    assert json.dumps({"action": AuditAction.RUN_REQUESTED}) == '{"action": "run.requested"}'


def test_no_action_value_is_written_twice():
    values = [a.value for a in AuditAction]
    assert len(values) == len(set(values))


# --------------------------------------------------------------------------- canonical JSON
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(json_values)
def test_canonical_json_is_a_fixed_point_and_round_trips(value):
    text = canonical_json(value)
    assert json.loads(text) == value
    assert canonical_json(json.loads(text)) == text
    assert "\n" not in text


def test_canonical_json_sorts_keys_and_keeps_unicode():
    assert canonical_json({"b": 1, "a": ["é", 2]}) == '{"a":["é",2],"b":1}'


# --------------------------------------------------------------------------- transactions
def test_an_appended_event_rolls_back_with_its_transaction(db_url):
    engine = get_engine(db_url)
    record_event(actor="t", action="test.event", engine=engine)
    with Session(engine) as s:
        append_event(s, actor="t", action="test.event", payload={"kept": False})
        s.rollback()
    with Session(engine) as s:
        append_event(s, actor="t", action=AuditAction.USER_ADDED, payload={"kept": True})
        s.commit()
    events = list(iter_events(engine=engine))
    assert [e.action for e in events] == ["test.event", "user.added"]
    assert verify_chain(engine).ok


def test_a_transition_applied_in_a_session_commits_with_its_artifacts(db_url):
    engine = get_engine(db_url)
    run = make_run(engine)
    with Session(engine) as s:
        runs.add_artifacts(s, run.id, [("draft", "/tmp/x", "ab" * 32, 3)])
        runs.apply_transition(s, run.id, Status.ANONYMIZED, actor="flow")
        s.rollback()
    assert runs.get_run(run.id, engine).status == Status.REQUESTED
    assert runs.list_artifacts(run.id, engine=engine) == []
    with Session(engine) as s:
        runs.add_artifacts(s, run.id, [("draft", "/tmp/x", "ab" * 32, 3)])
        runs.apply_transition(s, run.id, Status.ANONYMIZED, actor="flow")
        s.commit()
    assert runs.get_run(run.id, engine).status == Status.ANONYMIZED
    assert [a.kind for a in runs.list_artifacts(run.id, engine=engine)] == ["draft"]
    assert [e.action for e in iter_events(run.id, engine=engine)] == [
        "run.requested", "run.anonymized"]


def test_a_decision_given_as_enum_or_text_is_stored_as_the_same_text(db_url):
    engine = get_engine(db_url)
    first, second = make_run(engine), make_run(engine)
    for run in (first, second):
        to_awaiting(run.id, engine)
    runs.decide(first.id, reviewer="rev", decision=Decision.APPROVE, reason="ok", engine=engine)
    runs.decide(second.id, reviewer="rev", decision="approve", reason="ok", engine=engine)
    with Session(engine) as s:
        stored = {r.run_id: r.decision for r in s.exec(select(Approval)).all()}
    assert stored == {first.id: "approve", second.id: "approve"}
    payloads = [json.loads(e.payload_json) for r in (first, second)
                for e in iter_events(r.id, engine=engine) if e.action == "run.approved"]
    assert [p["decision"] for p in payloads] == ["approve", "approve"]


# --------------------------------------------------------------------------- result tables
def test_result_tables_share_the_base_columns():
    shared = {"id", "run_id", "created_at"}
    for table in (VerificationResult, UtilityResult, ArtifactRecord):
        assert issubclass(table, RunRecordBase)
        columns = set(table.__table__.columns.keys())
        assert shared <= columns
        run_id = table.__table__.columns["run_id"]
        assert run_id.index and [fk.target_fullname for fk in run_id.foreign_keys] == [
            "release_runs.id"]
    assert issubclass(VerificationResult, RunReportBase)
    assert not hasattr(RunRecordBase, "__table__")


def test_results_round_trip_through_the_shared_base(db_url):
    engine = get_engine(db_url)
    run = make_run(engine)
    runs.save_verification(run.id, {"holds": True, "requirements": []}, engine)
    runs.save_utility(run.id, {"metrics": {"are": 0.5}, "tables": {}}, engine)
    assert runs.latest_verification(run.id, engine) == {"holds": True, "requirements": []}
    assert runs.latest_utility(run.id, engine) == {"metrics": {"are": 0.5}, "tables": {}}
