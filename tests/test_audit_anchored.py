"""Issue 15 item 1: a keyed, anchored audit chain that the runs and approvals must agree with.

Every attack here is one a person with database access (but not the home folder, which holds
the audit key and the head file) can make; each ran undetected before the chain was keyed and
anchored. All run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import Session, col, select

from ehr_release.core.canonical import canonical_json
from ehr_release.core.errors import ConfigError
from ehr_release.core.files import sha256_bytes
from ehr_release.governance.integrity import check_integrity
from ehr_release.storage import runs
from ehr_release.storage.anchors import HEADS_FILE, read_anchors
from ehr_release.storage.audit import (
    AUDIT_KEY_ENV,
    AUDIT_KEY_FILE,
    RETIRED_KEYS_DIR,
    chain_head,
    event_hash,
    hash_version,
    record_event,
    rotate_audit_key,
    verify_chain,
)
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import AuditEvent, DatasetRecord, utc_now
from ehr_release.storage.runs import Status

TO_AWAITING = [Status.ANONYMIZED, Status.VERIFIED, Status.EVALUATED, Status.CERTIFIED,
               Status.AWAITING_APPROVAL]


@pytest.fixture(autouse=True)
def _file_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests exercise the key file; a key in the developer's environment would hide it."""
    monkeypatch.delenv(AUDIT_KEY_ENV, raising=False)
    monkeypatch.delenv("EHR_RELEASE_AUDIT_RETIRED_KEYS", raising=False)


def _run(engine, out: Path, requester: str = "alice") -> str:
    ds = DatasetRecord(fingerprint="ab" * 32, rows=10, codes=30, columns_json="{}", source="x")
    run = runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester=requester,
                          algorithm="code-counts", parameters={"k": "2"}, out_dir=str(out),
                          engine=engine)
    for status in TO_AWAITING:
        runs.transition(run.id, status, actor="flow", engine=engine)
    return run.id


def _published(engine, out: Path, head: str | None = None) -> str:
    """A run taken to ``published`` the way ``publish_release`` records it (no Prefect)."""
    run_id = _run(engine, out)
    runs.decide(run_id, reviewer="bob", decision="approve", reason="fine", engine=engine)
    folder = out / "releases" / run_id
    folder.mkdir(parents=True)
    manifest = (canonical_json({"run_id": run_id, "audit_head_at_certification":
                                head or chain_head(engine)[0]}) + "\n").encode()
    (folder / "manifest.json").write_bytes(manifest)
    with Session(engine) as s:
        runs.add_artifacts(s, run_id, [("published", str(folder / "manifest.json"),
                                        sha256_bytes(manifest), len(manifest))])
        runs.apply_transition(s, run_id, Status.PUBLISHED, actor="bob",
                              payload={"folder": folder.name, "files": ["manifest.json"],
                                       "manifest_sha256": sha256_bytes(manifest)})
        s.commit()
    return run_id


def _sql(engine, statement: str, **params: object) -> None:
    with Session(engine) as s:
        s.exec(text(statement).bindparams(**params))
        s.commit()


def _rechain_unkeyed(engine, start: int) -> None:
    """What an attacker without the key can do: recompute every hash from ``start`` on with
    the published (plain SHA-256) algorithm, keeping the links consistent."""
    with Session(engine) as s:
        rows = s.exec(select(AuditEvent).where(AuditEvent.seq >= start)
                      .order_by(col(AuditEvent.seq))).all()
        prev = s.exec(select(AuditEvent.hash).where(AuditEvent.seq == start - 1)).first() \
            or "0" * 64
        for ev in rows:
            ev.prev_hash = prev
            ev.hash = event_hash(seq=ev.seq, created_at=ev.created_at, actor=ev.actor,
                                 action=ev.action, run_id=ev.run_id,
                                 payload_json=ev.payload_json, prev_hash=prev)
            s.add(ev)
            s.flush()
            prev = ev.hash
        s.commit()


def _problems(engine) -> str:
    problems, summary = check_integrity(engine)
    return "\n".join(problems) or summary


# ----------------------------------------------------------------------------- baseline
def test_untouched_history_verifies_and_is_anchored(db_url, ehr_home, tmp_path):
    engine = get_engine(db_url)
    _published(engine, tmp_path / "out")
    problems, summary = check_integrity(engine)
    assert problems == [], problems
    assert "all intact" in summary
    assert all(hash_version(ev.hash) == (2, ev.hash[3:11]) for ev in _events(engine))
    heads = ehr_home / HEADS_FILE
    assert stat.S_IMODE(heads.stat().st_mode) == 0o600
    assert stat.S_IMODE((ehr_home / AUDIT_KEY_FILE).stat().st_mode) == 0o600
    # every event is anchored (issue 33: not only the decision points); approving reads the
    # site's releases root, which a fresh home records on first use (one more event)
    assert [a.seq for a in read_anchors(engine)] == [ev.seq for ev in _events(engine)]


def _events(engine) -> list[AuditEvent]:
    with Session(engine) as s:
        return list(s.exec(select(AuditEvent).order_by(col(AuditEvent.seq))).all())


def test_rolled_back_transition_writes_no_anchor(db_url, tmp_path):
    engine = get_engine(db_url)
    run_id = _run(engine, tmp_path)
    before = read_anchors(engine)
    with Session(engine) as s:
        runs.apply_transition(s, run_id, Status.FAILED, actor="flow", error="x")
        s.rollback()
    assert read_anchors(engine) == before
    assert check_integrity(engine)[0] == []


# ----------------------------------------------------------------------------- attacks
def test_deleting_the_newest_events_is_detected(db_url, tmp_path):
    engine = get_engine(db_url)
    run_id = _published(engine, tmp_path / "out")
    seq = {ev.action: ev.seq for ev in _events(engine)}
    awaiting, published = seq["run.awaiting_approval"], seq["run.published"]
    # The attack: drop "approved" and "published"; the run row is put back to match.
    _sql(engine, "DELETE FROM audit_events WHERE seq > :s", s=awaiting)
    _sql(engine, "UPDATE release_runs SET status = 'awaiting_approval' WHERE id = :r", r=run_id)
    assert verify_chain(engine).ok  # the shorter chain is still a valid chain …
    found = _problems(engine)
    assert (f"audit chain truncated: it ends at event {awaiting} but the head file recorded "
            f"event {published}") in found  # … but not the one the head file saw


def test_rewriting_with_plain_sha256_is_detected(db_url, tmp_path):
    engine = get_engine(db_url)
    run_id = _run(engine, tmp_path)
    runs.decide(run_id, reviewer="bob", decision="reject", reason="too coarse", engine=engine)
    _sql(engine, "UPDATE audit_events SET payload_json = :p WHERE seq = 7",
         p=canonical_json({"decision": "approve", "from": "awaiting_approval", "reason": "ok",
                           "to": "approved"}))
    _rechain_unkeyed(engine, 7)
    check = verify_chain(engine)
    assert not check.ok and check.seq == 7 and "downgrade" in (check.problem or "")
    assert "audit chain broken" in _problems(engine)


def test_rewriting_the_whole_chain_unkeyed_contradicts_the_head_file(db_url, tmp_path):
    engine = get_engine(db_url)
    _run(engine, tmp_path)
    _sql(engine, "UPDATE audit_events SET actor = 'mallory' WHERE seq = 2")
    _rechain_unkeyed(engine, 1)  # no keyed event left to downgrade from
    assert verify_chain(engine).ok and verify_chain(engine).legacy == 6
    assert "audit chain rewritten: event 1" in _problems(engine)


def test_rewriting_with_a_key_of_ones_own_is_detected(db_url, tmp_path):
    engine = get_engine(db_url)
    _run(engine, tmp_path)
    with Session(engine) as s:
        ev = s.get(AuditEvent, 6)
        assert ev is not None
        ev.actor = "mallory"
        ev.hash = event_hash(seq=ev.seq, created_at=ev.created_at, actor=ev.actor,
                             action=ev.action, run_id=ev.run_id, payload_json=ev.payload_json,
                             prev_hash=ev.prev_hash, key=b"\x01" * 32)
        s.add(ev)
        s.commit()
    check = verify_chain(engine)
    assert not check.ok and "does not hold" in (check.problem or "")


def test_editing_the_approval_row_is_detected(db_url, tmp_path):
    engine = get_engine(db_url)
    run_id = _run(engine, tmp_path, requester="alice")
    runs.decide(run_id, reviewer="bob", decision="approve", reason="fine", engine=engine)
    assert check_integrity(engine)[0] == []
    _sql(engine, "UPDATE approvals SET reviewer = 'alice' WHERE run_id = :r", r=run_id)
    assert ("approval reviewer is 'alice' but the audit chain recorded 'bob'"
            in _problems(engine))


def test_editing_the_run_status_is_detected(db_url, tmp_path):
    engine = get_engine(db_url)
    run_id = _run(engine, tmp_path)
    _sql(engine, "UPDATE release_runs SET status = 'approved' WHERE id = :r", r=run_id)
    assert ("is approved in the database but the audit chain last recorded awaiting_approval"
            in _problems(engine))


def test_manifest_head_not_in_the_chain_is_detected(db_url, tmp_path):
    engine = get_engine(db_url)
    _published(engine, tmp_path / "out", head="ab" * 32)
    assert "names audit head abababababababab…, which is not in the chain" in _problems(engine)


# ----------------------------------------------------------------------------- versions, keys
def test_legacy_unkeyed_events_still_verify_and_new_ones_are_keyed(db_url):
    engine = get_engine(db_url)
    prev = "0" * 64
    with Session(engine) as s:  # a database written before the audit key existed
        for seq in (1, 2, 3):
            created, payload = utc_now(), canonical_json({"i": seq})
            h = event_hash(seq=seq, created_at=created, actor="old", action="test.event",
                           run_id=None, payload_json=payload, prev_hash=prev)
            s.add(AuditEvent(seq=seq, created_at=created, actor="old", action="test.event",
                             run_id=None, payload_json=payload, prev_hash=prev, hash=h))
            prev = h
        s.commit()
    check = verify_chain(engine)
    assert check.ok and check.legacy == 3 and check.key_ids == ()
    ev = record_event(actor="new", action="test.event", engine=engine)
    assert hash_version(ev.hash)[0] == 2
    check = verify_chain(engine)
    assert check.ok and check.events == 4 and check.legacy == 3
    assert [a.seq for a in read_anchors(engine)] == [4]  # the (first) keyed event is anchored
    assert check_integrity(engine)[0] == []


def test_key_rotation_keeps_old_events_verifiable(db_url, ehr_home):
    engine = get_engine(db_url)
    record_event(actor="t", action="test.event", engine=engine)
    old_id = verify_chain(engine).key_ids[0]
    new_id = rotate_audit_key(engine=engine)
    record_event(actor="t", action="test.event", engine=engine)
    check = verify_chain(engine)
    assert check.ok and check.key_ids == (old_id, new_id)
    rotated = _events(engine)[1]
    assert rotated.action == "audit.key_rotated" and rotated.hash.startswith(f"v2:{old_id}:")
    assert json.loads(rotated.payload_json) == {"previous_key_id": old_id,
                                                "new_key_id": new_id}
    retired = ehr_home / RETIRED_KEYS_DIR / f"{old_id}.key"
    assert stat.S_IMODE(retired.stat().st_mode) == 0o600
    assert stat.S_IMODE((ehr_home / AUDIT_KEY_FILE).stat().st_mode) == 0o600
    retired.unlink()  # the old key lost: its events can no longer be vouched for
    assert "does not hold" in (verify_chain(engine).problem or "")


def test_a_key_swapped_in_without_rotation_is_refused(db_url, ehr_home):
    engine = get_engine(db_url)
    record_event(actor="t", action="test.event", engine=engine)
    old_id = verify_chain(engine).key_ids[0]
    (ehr_home / RETIRED_KEYS_DIR).mkdir()  # the old key kept, but no rotation event written
    (ehr_home / AUDIT_KEY_FILE).rename(ehr_home / RETIRED_KEYS_DIR / f"{old_id}.key")
    (ehr_home / AUDIT_KEY_FILE).write_text(os.urandom(32).hex())
    record_event(actor="t", action="test.event", engine=engine)
    check = verify_chain(engine)
    assert not check.ok and check.seq == 2 and "no audit.key_rotated" in (check.problem or "")


def test_audit_key_from_environment(db_url, ehr_home, monkeypatch):
    engine = get_engine(db_url)
    monkeypatch.setenv(AUDIT_KEY_ENV, "cd" * 32)
    record_event(actor="t", action="test.event", engine=engine)
    assert not (ehr_home / AUDIT_KEY_FILE).exists()
    with pytest.raises(ConfigError, match="pass the new key"):
        rotate_audit_key(engine=engine)
    monkeypatch.setenv(AUDIT_KEY_ENV, "ab" * 8)
    with pytest.raises(ConfigError, match=f"{AUDIT_KEY_ENV}.*at least 32"):
        record_event(actor="t", action="test.event", engine=engine)


@pytest.mark.parametrize("name", ["notes.csv", ".hidden"])
def test_a_file_added_to_a_published_folder_is_reported(db_url, tmp_path, name):
    """A published folder is exactly the files verified, approved and recorded: one put in
    beside them afterwards reaches the recipient unverified, so ``audit verify`` names it
    (a hidden one too: the re-verifier skips hidden files, the recipient gets them)."""
    engine = get_engine(db_url)
    out = tmp_path / "out"
    run_id = _published(engine, out)
    assert check_integrity(engine)[0] == []
    (out / "releases" / run_id / name).write_text("patient_id,code\nMRN-1,296.01\n")
    problems = "\n".join(check_integrity(engine)[0])
    assert run_id in problems and name in problems and "not recorded" in problems
