"""Release runs: creation, the status state machine applied, results, approvals, artifacts.

The state machine's rules themselves (statuses, allowed moves) are in
:mod:`ehr_release.storage.run_status`, which needs no database library.

Every state change writes its audit event in the same transaction, so the database never
shows a status the audit trail does not explain (and vice versa).
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from ehr_release.core.canonical import canonical_json
from ehr_release.core.errors import ApprovalError, IllegalTransition, NotFound, cap
from ehr_release.storage import budget, chained
from ehr_release.storage.actions import AuditAction, Decision, status_action
from ehr_release.storage.audit import append_event, iter_events, record_event
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.four_eyes import same_person
from ehr_release.storage.models import (
    Approval,
    ArtifactRecord,
    DatasetRecord,
    ReleaseRun,
    UtilityResult,
    VerificationResult,
    utc_now,
)
from ehr_release.storage.run_id import new_run_id as new_run_id
from ehr_release.storage.run_status import TERMINAL, TRANSITIONS, Status, unknown_run
from ehr_release.storage.run_status import (  # re-exported: tests ask runs.publication_failed
    publication_failed as publication_failed,
)


def create_run(*, run_id: str, dataset: DatasetRecord, requester: str, algorithm: str,
               parameters: dict[str, Any], out_dir: str, flow_run_id: str | None = None,
               engine: Engine | None = None) -> ReleaseRun:
    """Register a dataset and a run in ``requested`` status, with its audit event, atomically."""
    with Session(_engine(engine)) as s:
        if dataset.id is None:
            s.add(dataset)
            s.flush()
        run = ReleaseRun(id=run_id, dataset_id=dataset.id, requester=requester,
                         algorithm=algorithm, parameters_json=canonical_json(parameters),
                         status=Status.REQUESTED, out_dir=out_dir, flow_run_id=flow_run_id)
        s.add(run)
        s.flush()
        append_event(s, actor=requester, action=AuditAction.RUN_REQUESTED, run_id=run_id,
                     payload={"algorithm": algorithm, "parameters": parameters,
                              "dataset_fingerprint": dataset.fingerprint,
                              "dataset_rows": dataset.rows})
        s.commit()
        s.refresh(run)
        return run


def find_run(run_id: str, engine: Engine | None = None) -> ReleaseRun | None:
    with Session(_engine(engine)) as s:
        return s.get(ReleaseRun, run_id)


def check_resumable(run: ReleaseRun, *, fingerprint: str, algorithm: str,
                    parameters: dict[str, Any], engine: Engine | None = None) -> None:
    """A crashed run may be resumed only with the very same data, algorithm and parameters,
    and only while it has not ended."""
    if Status(run.status) in TERMINAL:
        raise IllegalTransition(f"run {run.id} is {run.status}; it cannot be resumed")
    dataset = get_dataset(run.dataset_id, engine)
    if (dataset.fingerprint != fingerprint or run.algorithm != algorithm
            or json.loads(run.parameters_json) != json.loads(canonical_json(parameters))):
        raise IllegalTransition(f"run {run.id} was requested with other data or parameters; "
                                "start a new release instead")


def get_run(run_id: str, engine: Engine | None = None) -> ReleaseRun:
    with Session(_engine(engine)) as s:
        run = s.get(ReleaseRun, run_id)
        if run is None:
            raise unknown_run(run_id)
        return run


def list_runs(limit: int = 50, engine: Engine | None = None) -> list[ReleaseRun]:
    with Session(_engine(engine)) as s:
        q = select(ReleaseRun).order_by(col(ReleaseRun.created_at).desc()).limit(limit)
        return list(s.exec(q).all())


def get_dataset(dataset_id: int, engine: Engine | None = None) -> DatasetRecord:
    with Session(_engine(engine)) as s:
        rec = s.get(DatasetRecord, dataset_id)
        if rec is None:
            raise NotFound(f"no dataset with id {dataset_id}")
        return rec


def transition(run_id: str, to: Status, *, actor: str, payload: dict[str, Any] | None = None,
               error: str | None = None, engine: Engine | None = None) -> ReleaseRun:
    """Move a run to ``to`` in a transaction of its own (see :func:`apply_transition`)."""
    with Session(_engine(engine)) as s:
        run = apply_transition(s, run_id, to, actor=actor, payload=payload, error=error)
        s.commit()
        s.refresh(run)
        return run


def apply_transition(session: Session, run_id: str, to: Status, *, actor: str,
                     payload: dict[str, Any] | None = None,
                     error: str | None = None) -> ReleaseRun:
    """Move a run to ``to`` if the state machine allows it, inside ``session``'s transaction.

    The audit event joins the same transaction (the caller commits), so the status and its
    event are stored together or not at all. The row is re-read under lock (``SELECT … FOR
    UPDATE`` on PostgreSQL, the write lock on SQLite) so two processes cannot both make a
    move from the same state.
    """
    run = session.exec(select(ReleaseRun).where(ReleaseRun.id == run_id)
                       .with_for_update()).first()
    if run is None:
        raise unknown_run(run_id)
    current = Status(run.status)
    if to not in TRANSITIONS[current]:
        raise IllegalTransition(f"run {run_id} cannot move from {current} to {to}")
    run.status = to
    run.updated_at = utc_now()
    if error is not None:
        run.error = cap(error)
    session.add(run)
    append_event(session, actor=actor, action=status_action(to), run_id=run_id,
                 payload={"from": str(current), "to": str(to), **(payload or {}),
                          **({"error": error} if error else {})})
    return run


def fail_run(run_id: str, *, actor: str, error: str, engine: Engine | None = None) -> bool:
    """Mark a run failed unless it already reached a terminal status; True if it moved."""
    run = get_run(run_id, engine)
    if Status(run.status) in TERMINAL:
        return False
    transition(run_id, Status.FAILED, actor=actor, error=error, engine=engine)
    return True


def record_publish_failure(run_id: str, *, actor: str, error: str,
                           engine: Engine | None = None) -> bool:
    """Record that publishing an approved run failed; the run stays ``approved``.

    Why not ``failed``: the decision and the pinned, verified candidate are still good — a
    full disk or a broken destination says nothing about the release — and a failed run
    could only be redone by a new request that draws (and spends ε) again. The stored,
    value-free reason goes to ``release_runs.error`` (shown as "publication failed") and to a
    ``publish.failed`` event; ``ehr-release publish RUN`` retries. True if recorded (False:
    the run is no longer approved).
    """
    with Session(_engine(engine)) as s:
        run = s.exec(select(ReleaseRun).where(ReleaseRun.id == run_id)
                     .with_for_update()).first()
        if run is None or run.status != Status.APPROVED:
            return False
        run.error = cap(error)
        run.updated_at = utc_now()
        s.add(run)
        append_event(s, actor=actor, action=AuditAction.PUBLISH_FAILED, run_id=run_id,
                     payload={"error": error, "retry": f"ehr-release publish {run_id}"})
        s.commit()
        return True


def set_flow_run_id(run_id: str, flow_run_id: str, engine: Engine | None = None) -> None:
    with Session(_engine(engine)) as s:
        run = s.get(ReleaseRun, run_id)
        if run is None:
            raise unknown_run(run_id)
        run.flow_run_id = flow_run_id
        s.add(run)
        s.commit()


def save_verification(run_id: str, report: dict[str, Any], engine: Engine | None = None) -> None:
    with Session(_engine(engine)) as s:
        s.add(VerificationResult(run_id=run_id, holds=bool(report["holds"]),
                                 report_json=canonical_json(report)))
        s.commit()


def save_utility(run_id: str, report: dict[str, Any], engine: Engine | None = None) -> None:
    with Session(_engine(engine)) as s:
        s.add(UtilityResult(run_id=run_id, metrics_json=canonical_json(report["metrics"]),
                            report_json=canonical_json(report)))
        s.commit()


def latest_verification(run_id: str, engine: Engine | None = None) -> dict[str, Any] | None:
    with Session(_engine(engine)) as s:
        row = s.exec(select(VerificationResult).where(VerificationResult.run_id == run_id)
                     .order_by(col(VerificationResult.id).desc())).first()
        return json.loads(row.report_json) if row else None


def latest_utility(run_id: str, engine: Engine | None = None) -> dict[str, Any] | None:
    with Session(_engine(engine)) as s:
        row = s.exec(select(UtilityResult).where(UtilityResult.run_id == run_id)
                     .order_by(col(UtilityResult.id).desc())).first()
        return json.loads(row.report_json) if row else None


#: The decisions a reviewer may record.
DECISIONS = frozenset(Decision)


def check_decision(run_id: str, *, reviewer: str, decision: Decision | str, reason: str,
                   engine: Engine | None = None) -> ReleaseRun:
    """The run a decision is about, once the refusals that need only the database passed.

    Refuses (with an audit event of the refusal) an unknown decision word, an empty reason
    or reviewer, an unknown run, a reviewer who requested the run (as the chain's
    ``run.requested`` event says, not the editable column) and a run not awaiting approval.
    Callers run it before anything costly (the history re-check, the publishing flow), so a
    refusal answers in the time it takes to open the database (issue 37 goal 3).
    """
    engine = _engine(engine)
    if decision not in DECISIONS:
        _refuse(run_id, reviewer, f"decision must be approve or reject, got {decision!r}", engine)
    if not reason.strip():
        _refuse(run_id, reviewer, "a reason is required for every decision", engine)
    if not reviewer.strip():
        _refuse(run_id, reviewer, "a reviewer name is required", engine)
    try:
        run = get_run(run_id, engine)
    except NotFound:  # a decision on a run that does not exist is a refusal like any other
        _refuse(run_id, reviewer, f"no release run with id {run_id!r}", engine)
    # The requester as the chain recorded it: the release_runs column is anyone's to edit.
    requested_by = chained.requester(run_id, engine)
    if requested_by is None:
        _refuse(run_id, reviewer, f"run {run_id} has no authentic run.requested event in the "
                                  "audit trail; run `ehr-release audit verify`", engine)
    if same_person(requested_by, reviewer):
        _refuse(run_id, reviewer, f"reviewer {reviewer!r} requested this run and may not "
                                  "decide it", engine)
    if run.status != Status.AWAITING_APPROVAL:  # before the costly checks below
        _refuse(run_id, reviewer, _not_awaiting(run_id, run.status, engine), engine)
    return run


def decide(run_id: str, *, reviewer: str, decision: Decision | str, reason: str,
           channel: str = "cli", role: str | None = None,
           engine: Engine | None = None) -> Approval:
    """Record the reviewer's decision and move the run to approved or rejected.

    Refuses (with an audit event of the refusal) what :func:`check_decision` refuses, another
    decision that already won, and — for an approval — an ε budget it would exceed or a
    release that could not be published at its destination (outside the site's releases
    root, moved, not writable): such an approval would be recorded and then end the run
    failed. The unique constraint on ``approvals.run_id`` is the last line of defence
    against two simultaneous decisions.
    """
    engine = _engine(engine)
    run = check_decision(run_id, reviewer=reviewer, decision=decision, reason=reason,
                         engine=engine)
    if decision == Decision.APPROVE:
        spent = budget.run_account(run_id, engine)
        if spent is not None and spent.exceeded:
            _refuse(run_id, reviewer, "approving would exceed the ε budget of its patients: "
                                      + spent.text(), engine)
        from ehr_release.storage.destinations import destination_problem

        if (problem := destination_problem(run.out_dir)) is not None:
            _refuse(run_id, reviewer, f"approving would not publish: {problem}; nothing was "
                                      "recorded and the run still awaits a decision", engine)
    target = Status.APPROVED if decision == Decision.APPROVE else Status.REJECTED
    try:
        with Session(engine) as s:
            existing = s.exec(select(Approval).where(Approval.run_id == run_id)).first()
            if existing is not None:
                raise ApprovalError(f"run {run_id} was already decided ({existing.decision} by "
                                    f"{existing.reviewer})")
            apply_transition(s, run_id, target, actor=reviewer,
                             payload={"decision": decision, "reason": reason,
                                      "channel": channel, "role": role})
            approval = Approval(run_id=run_id, reviewer=reviewer, decision=decision,
                                reason=reason)
            s.add(approval)
            s.commit()
            s.refresh(approval)
            return approval
    except IntegrityError:
        _refuse(run_id, reviewer, f"run {run_id} was already decided", engine)
    except (ApprovalError, IllegalTransition) as exc:
        msg = (str(exc) if isinstance(exc, ApprovalError)
               else _not_awaiting(run_id, get_run(run_id, engine).status, engine))
        _refuse(run_id, reviewer, msg, engine)
    raise AssertionError("unreachable")


def _not_awaiting(run_id: str, status: str, engine: Engine) -> str:
    """Why a run that is not awaiting approval takes no decision: the decision on record,
    if there is one, else its status. Read before the ε account and the registry are
    loaded, so a refused second decision answers at once (issue 34 finding 9)."""
    with Session(engine) as s:
        existing = s.exec(select(Approval).where(Approval.run_id == run_id)).first()
    if existing is not None:
        return (f"run {run_id} was already decided ({existing.decision} by "
                f"{existing.reviewer})")
    return f"run {run_id} is {status}, not awaiting approval"


def decision_channel(run_id: str, engine: Engine | None = None) -> tuple[str, str | None]:
    """(channel, role) of the run's recorded decision, read from the audit chain itself."""
    found: tuple[str, str | None] = ("unknown", None)
    for ev in iter_events(run_id, engine=_engine(engine)):
        if ev.action in (AuditAction.RUN_APPROVED, AuditAction.RUN_REJECTED):
            payload = json.loads(ev.payload_json)
            found = (str(payload.get("channel", "cli")), payload.get("role"))
    return found


def _refuse(run_id: str, actor: str, message: str, engine: Engine) -> NoReturn:
    record_event(actor=actor or "(anonymous)", action=AuditAction.APPROVAL_REFUSED,
                 run_id=run_id if _run_exists(run_id, engine) else None,
                 payload={"reason": message, "requested_run": run_id}, engine=engine)
    raise ApprovalError(message)


def _run_exists(run_id: str, engine: Engine) -> bool:
    with Session(engine) as s:
        return s.get(ReleaseRun, run_id) is not None


def get_approval(run_id: str, engine: Engine | None = None) -> Approval | None:
    with Session(_engine(engine)) as s:
        return s.exec(select(Approval).where(Approval.run_id == run_id)).first()


def add_artifacts(session: Session, run_id: str,
                  items: list[tuple[str, str, str, int]]) -> None:
    """Record (kind, path, sha256, size) rows inside the caller's transaction."""
    for kind, path, digest, size in items:
        session.add(ArtifactRecord(run_id=run_id, kind=kind, path=path, sha256=digest,
                                   size=size))


def record_artifacts(run_id: str, items: list[tuple[str, str, str, int]],
                     engine: Engine | None = None) -> None:
    with Session(_engine(engine)) as s:
        add_artifacts(s, run_id, items)
        s.commit()


def list_artifacts(run_id: str | None = None, kind: str | None = None,
                   engine: Engine | None = None) -> list[ArtifactRecord]:
    with Session(_engine(engine)) as s:
        q = select(ArtifactRecord)
        if run_id is not None:
            q = q.where(ArtifactRecord.run_id == run_id)
        if kind is not None:
            q = q.where(ArtifactRecord.kind == kind)
        return list(s.exec(q.order_by(col(ArtifactRecord.id))).all())


def pin_candidate(run_id: str, digests: dict[str, tuple[str, int]],
                  engine: Engine | None = None) -> None:
    """Record the hashes of the release the reviewer will be shown (kind ``candidate``).

    Called again on a resumed run, it insists the release is byte-for-byte the same one:
    an approval covers one specific release, never a re-drawn one.
    """
    pinned = {a.path: (a.sha256, a.size) for a in list_artifacts(run_id, "candidate", engine)}
    if not pinned:
        record_artifacts(run_id, [("candidate", name, sha, size)
                                  for name, (sha, size) in sorted(digests.items())], engine)
    elif pinned != digests:
        raise IllegalTransition(f"run {run_id}: the release differs from the one first "
                                "produced for it; refusing to continue")


def pinned_candidate(run_id: str, engine: Engine | None = None) -> dict[str, tuple[str, int]]:
    return {a.path: (a.sha256, a.size) for a in list_artifacts(run_id, "candidate", engine)}
