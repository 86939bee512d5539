"""Storage on SQLite and PostgreSQL: audit chain, tamper detection, state machine, decisions."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest
from sqlalchemy import text
from sqlmodel import Session

from ehr_release.core.errors import ApprovalError, IllegalTransition
from ehr_release.storage import runs
from ehr_release.storage.audit import export_events, record_event, verify_chain
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import DatasetRecord
from ehr_release.storage.runs import Status

PATH_TO_AWAITING = [Status.ANONYMIZED, Status.VERIFIED, Status.EVALUATED, Status.CERTIFIED,
                    Status.AWAITING_APPROVAL]


def make_run(engine, requester="steward"):
    ds = DatasetRecord(fingerprint="ab" * 32, rows=10, codes=30, columns_json="{}", source="x")
    return runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester=requester,
                           algorithm="code-counts", parameters={"k": "2"}, out_dir="/tmp",
                           engine=engine)


def to_awaiting(run_id, engine):
    for status in PATH_TO_AWAITING:
        runs.transition(run_id, status, actor="flow", engine=engine)


def test_chain_records_and_verifies(db_url):
    engine = get_engine(db_url)
    for i in range(5):
        record_event(actor="tester", action="test.event", payload={"i": i}, engine=engine)
    check = verify_chain(engine)
    assert check.ok and check.events == 5
    lines = export_events(None, "jsonl", engine).splitlines()
    assert len(lines) == 5 and '"i":4' in lines[-1]
    assert export_events(None, "csv", engine).splitlines()[0].startswith("seq,created_at")


@pytest.mark.parametrize("tamper", [
    "UPDATE audit_events SET payload_json = '{\"i\": 99}' WHERE seq = 2",
    "UPDATE audit_events SET actor = 'mallory' WHERE seq = 3",
    "DELETE FROM audit_events WHERE seq = 2",
])
def test_tampering_is_detected(db_url, tamper):
    engine = get_engine(db_url)
    for i in range(4):
        record_event(actor="tester", action="test.event", payload={"i": i}, engine=engine)
    with Session(engine) as s:
        s.exec(text(tamper))
        s.commit()
    check = verify_chain(engine)
    assert not check.ok
    assert check.seq in {2, 3}


def test_state_machine(db_url):
    engine = get_engine(db_url)
    run = make_run(engine)
    with pytest.raises(IllegalTransition, match="cannot move from requested to published"):
        runs.transition(run.id, Status.PUBLISHED, actor="x", engine=engine)
    with pytest.raises(IllegalTransition):
        runs.transition(run.id, Status.APPROVED, actor="x", engine=engine)
    to_awaiting(run.id, engine)
    assert runs.get_run(run.id, engine).status == Status.AWAITING_APPROVAL
    assert runs.fail_run(run.id, actor="x", error="boom", engine=engine)
    assert not runs.fail_run(run.id, actor="x", error="again", engine=engine)
    with pytest.raises(IllegalTransition):
        runs.transition(run.id, Status.APPROVED, actor="x", engine=engine)
    actions = [line for line in export_events(run.id, "csv", engine).splitlines()[1:]]
    assert len(actions) == 1 + len(PATH_TO_AWAITING) + 1


def test_decisions_follow_the_rules(db_url):
    engine = get_engine(db_url)
    run = make_run(engine, requester="alice")
    with pytest.raises(ApprovalError, match="not awaiting approval"):
        runs.decide(run.id, reviewer="bob", decision="approve", reason="ok", engine=engine)
    to_awaiting(run.id, engine)
    with pytest.raises(ApprovalError, match="may not decide"):
        runs.decide(run.id, reviewer="Alice", decision="approve", reason="mine", engine=engine)
    with pytest.raises(ApprovalError, match="reason is required"):
        runs.decide(run.id, reviewer="bob", decision="approve", reason="  ", engine=engine)
    runs.decide(run.id, reviewer="bob", decision="approve", reason="looks fine", engine=engine)
    with pytest.raises(ApprovalError, match="already decided"):
        runs.decide(run.id, reviewer="carol", decision="reject", reason="no", engine=engine)
    assert runs.get_run(run.id, engine).status == Status.APPROVED
    refused = [ln for ln in export_events(run.id, "jsonl", engine).splitlines()
               if "approval.refused" in ln]
    assert len(refused) == 4
    assert verify_chain(engine).ok


def test_a_decision_on_a_run_that_does_not_exist_is_refused_and_audited(db_url):
    """Someone trying run ids leaves a trace, as any other refused decision does."""
    engine = get_engine(db_url)
    with pytest.raises(ApprovalError, match="no release run"):
        runs.decide("no-such-run", reviewer="bob", decision="approve", reason="ok",
                    engine=engine)
    refused = [json.loads(ln) for ln in export_events(None, "jsonl", engine).splitlines()
               if "approval.refused" in ln]
    assert [e["payload"]["requested_run"] for e in refused] == ["no-such-run"]
    assert verify_chain(engine).ok


def _writer(url: str, worker: int, n: int, threads: int = 1) -> None:
    import threading

    from ehr_release.storage.audit import record_event as rec
    from ehr_release.storage.engine import get_engine as ge

    engine = ge(url)

    def write(t: int) -> None:
        for i in range(n):
            rec(actor=f"w{worker}.{t}", action="race.event", payload={"i": i}, engine=engine)

    pool = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()


def _decider(url: str, run_id: str, reviewer: str, decision: str, out) -> None:
    from ehr_release.storage import runs as r
    from ehr_release.storage.engine import get_engine as ge

    try:
        r.decide(run_id, reviewer=reviewer, decision=decision, reason="race", engine=ge(url))
        out.put(("won", reviewer))
    except ApprovalError as exc:
        out.put(("lost", str(exc)))


def test_concurrent_writers_never_fork_the_chain(db_url):
    get_engine(db_url)  # create tables before the writers start
    ctx = mp.get_context("spawn")
    # Twenty concurrent writers: 5 processes x 4 threads, 10 events each.
    procs = [ctx.Process(target=_writer, args=(db_url, w, 10, 4)) for w in range(5)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    check = verify_chain(get_engine(db_url))
    assert check.ok and check.events == 200
    actors = {e["actor"] for e in map(json.loads, export_events(None, "jsonl",
                                                                 get_engine(db_url)).splitlines())}
    assert len(actors) == 20


def test_simultaneous_decisions_one_wins(db_url):
    engine = get_engine(db_url)
    run = make_run(engine, requester="alice")
    to_awaiting(run.id, engine)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_decider, args=(db_url, run.id, who, what, out))
             for who, what in (("bob", "approve"), ("carol", "reject"))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    results = sorted(out.get(timeout=10) for _ in procs)
    assert [r[0] for r in results] == ["lost", "won"]
    assert "already decided" in results[0][1] or "not awaiting approval" in results[0][1]
    assert verify_chain(engine).ok
