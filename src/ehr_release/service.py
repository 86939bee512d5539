"""What the CLI and the dashboard call: start a release or a comparison, decide a release,
watch and summarize a run.

Kept apart from both so every entry point enforces the same rules through the same code;
they only parse their input and show the result (progress is theirs, passed in as
callbacks).
"""

from __future__ import annotations

import os
import select
import subprocess
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ehr_release.core.errors import (
    ApprovalError,
    EhrReleaseError,
    IllegalTransition,
    NotFound,
    stored_message,
)
from ehr_release.flows.spawn import let_run, spawn_flow
from ehr_release.governance.identity import same_person
from ehr_release.storage import chained, pending, runs
from ehr_release.storage.actions import AuditAction, Decision
from ehr_release.storage.audit import record_event
from ehr_release.storage.destinations import resolve_destination
from ehr_release.storage.engine import get_reader, home
from ehr_release.storage.run_folder import LOG_FILE, hand_request, request_path, run_folder
from ehr_release.storage.run_view import RunState, state_of, summary_of
from ehr_release.storage.runs import TERMINAL, Status
from ehr_release.tasks.steps import step

if TYPE_CHECKING:  # the requests are Pydantic models: loaded by the commands that take one
    from concurrent.futures import Future

    from ehr_release.comparison.compare import Outcome
    from ehr_release.planning.request import ComparisonRequest, ReleaseRequest

SETTLED = TERMINAL | {Status.AWAITING_APPROVAL}


TIMEOUT_ACTOR = "system:approval-timeout"
#: How often a waiting command reads the run's status (one small query; the wait it adds to
#: a run is half of this on average).
POLL_S = 0.2


def precheck(request: ReleaseRequest, *, register: bool = False,
             preflighted: bool = False) -> None:
    """Reject a bad request before any process starts; the refusal is an audit event.

    The flow's ingest task checks the same things again (it must not trust its caller).
    With ``register`` the run is created (``requested``) once the input is known good, so a
    flow that dies while it starts still leaves a run that ``status`` reports as stalled.
    ``preflighted``: the caller already ran the standard-library preflight on this input
    (the CLI does, before the database loads); a second pass would only cost a good file
    its time again (≈ 1 s of CPU for 58,302 records), since the full read decides anyway.
    """
    from ehr_release.ingest.preflight import preflight
    from ehr_release.planning.plan import make_plan, parse_request_params

    try:
        # Parameters, then the file, without pandas (its import alone is ~0.4 s): a bad
        # request is refused at once. Then the full read; the ingest stage makes the same
        # plan again (it trusts no caller).
        parsed = parse_request_params(request)
        if not preflighted:
            preflight(request.input_path, request.diagnoses_path,
                      admissions_path=request.admissions_path,
                      class_column=request.class_column, code_system=request.code_system,
                      code_mapping=request.code_mapping)
        plan = make_plan(request, parsed=parsed)
        if register:
            from ehr_release.planning.intake import register_run  # no Prefect

            register_run(request, plan.dataset, plan.fingerprint)
    except EhrReleaseError as exc:
        record_refusal(request.requester, request.run_id, request.input_path, exc)
        raise


def record_refusal(requester: str, run_id: str, input_path: str, exc: EhrReleaseError
                   ) -> None:
    """The audit event of a refused request (its error as stored: no patient value)."""
    record_event(actor=requester, action=AuditAction.INGEST_REJECTED,
                 payload={"request": run_id, "input": input_path, "error": stored_message(exc)})


@contextmanager
def prefect_api(soon: Future[str] | None = None) -> Iterator[str]:
    """The Prefect API for the block: ``PREFECT_API_URL``, else this home's local server
    (started on first use). Every flow run in this process goes through here; the release
    flow's own process finds its API the same way (:mod:`ehr_release.flows.launch`).
    ``soon``: the search :func:`ehr_release.flows.server.ensure_api_soon` began earlier (a
    cold home's server starting while the caller loaded its flow), taken after the settings.
    """
    from ehr_release.flows.run_settings import flow_run_settings
    from ehr_release.flows.server import configured_api, local_api, tighten_home

    api_url = configured_api() or (soon.result() if soon is not None else local_api())
    try:
        with flow_run_settings(api_url):
            yield api_url
    finally:
        tighten_home()  # what Prefect wrote from this process, under the user's umask


def start_release(request: ReleaseRequest, *, wait_timeout_s: float,
                  on_status: Callable[[Status], None] | None = None,
                  process: subprocess.Popen[bytes] | None = None) -> Status:
    """Run a prechecked request's release flow in a detached process; wait until it settles
    (``awaiting_approval`` or terminal) and return that status.

    ``process`` is the flow process :func:`launch_background` started while the request
    was being checked (else one is started now); it is let go here. The flow process
    outlives this call (it may be resumed, and it parks the run for a reviewer);
    ``on_status`` sees every status the run moves through.
    """
    proc = process or launch_background(request)
    wait_until_ready(proc)
    let_run(proc)
    return wait_for_status(request.run_id, SETTLED, timeout_s=wait_timeout_s, proc=proc,
                           on_status=on_status)


def resume_release(run_id: str, *, wait_timeout_s: float,
                   on_status: Callable[[Status], None] | None = None) -> Status:
    """Start again the flow of a run whose process died; finished stages come from the
    cache. Refuses a run that has ended."""
    run = runs.get_run(run_id)
    if run.status in TERMINAL:
        raise EhrReleaseError(f"run {run_id} is {run.status}; nothing to resume")
    if run.status == Status.APPROVED:  # only its publishing is left: retry that, no new draw
        status = publish(run_id)
        if on_status is not None:
            on_status(status)
        return status
    request = saved_request(run_id)
    return start_release(request, wait_timeout_s=wait_timeout_s, on_status=on_status)


def start_comparison(request: ComparisonRequest,
                     on_candidate: Callable[[Outcome, int, int], None] | None = None,
                     ) -> dict[str, Any]:
    """Run a comparison here (it is short-lived): refuse a bad input before Prefect starts,
    then run the comparison flow on the request's task runner; returns its report.

    ``on_candidate(outcome, done, total)`` sees each candidate as it finishes.
    """
    from ehr_release.planning.intake import load_comparison_dataset

    load_comparison_dataset(request)  # before Prefect: bad input is refused fast
    with prefect_api():
        from ehr_release.flows.compare import candidate_listener, compare_flow
        from ehr_release.flows.runners import make_task_runner

        runner = make_task_runner(request.task_runner)
        with candidate_listener(on_candidate) if on_candidate else nullcontext():
            return compare_flow.with_options(task_runner=runner)(request)


def comparison_candidates(request: ComparisonRequest) -> list[Any]:
    """The candidates a comparison request expands to; refuses bad requirements, unknown
    algorithms and bad parameters before anything runs."""
    from ehr_release.comparison.compare import parse_requirement, plan
    from ehr_release.registry import get as get_algorithm

    for spec in request.requirements:
        parse_requirement(spec)
    return plan([get_algorithm(a) for a in request.algorithms], request.params, request.grid)


def run_summary(run_id: str) -> dict[str, Any]:
    """One run as a person should see it: status (``stalled`` when no flow works on it), the
    next step, parameters, verdict and decision. Overdue approvals are expired first."""
    expire_overdue(run_id)
    run = runs.get_run(run_id)
    return summary_of(run, run_state(run_id), requester=chained.requester(run_id),
                      verification=runs.latest_verification(run_id),
                      approval=runs.get_approval(run_id))


def refuse_self_approval(request: ReleaseRequest, reviewer: str) -> None:
    """A requester may never approve their own release (four-eyes principle)."""
    if same_person(request.requester, reviewer):
        message = f"reviewer {reviewer!r} requested this release and may not approve it"
        record_event(actor=reviewer, action=AuditAction.APPROVAL_REFUSED,
                     payload={"request": request.run_id, "reason": message})
        raise EhrReleaseError(message)


def launch_background(request: ReleaseRequest) -> subprocess.Popen[bytes]:
    """Start the flow's detached process for a request already checked (a resumed run); it
    runs nothing until :func:`let_run`. ``run`` starts it earlier, on the run id alone
    (:mod:`ehr_release.flows.spawn`)."""
    hand_request(request)  # first: the process reads it for its head start
    return spawn_flow(request.run_id)


def wait_until_ready(proc: subprocess.Popen[bytes]) -> None:
    """Block until the flow process has loaded Prefect and found its API, or has died
    (its first line on stdout, or the end of it); a second call returns at once."""
    if proc.stdout is None or proc.stdout.closed or proc in _READY:
        return
    proc.stdout.readline()
    _READY.add(proc)


#: Flow processes whose ``ready`` line was read (their stdout then carries only
#: :func:`failure_explanation`).
_READY: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()


def failure_explanation(proc: subprocess.Popen[bytes], *, timeout_s: float = 10.0
                        ) -> str | None:
    """What the flow process sent this terminal about its failure, which no store holds (a
    failed verification's measurements: :func:`ehr_release.flows.launch.tell_terminal`);
    None if it sent nothing before it ended or ``timeout_s`` passed."""
    if proc.stdout is None or proc.stdout.closed:
        return None
    fd, got = proc.stdout.fileno(), b""
    deadline = time.monotonic() + timeout_s
    with proc.stdout:
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([fd], [], [], left)[0]:
                break
            chunk = os.read(fd, 65536)
            if not chunk:  # the process ended (or closed its end)
                break
            got += chunk
    text = got.decode(errors="replace").strip()
    return text or None


def wait_for_status(run_id: str, targets: frozenset[Status], *, timeout_s: float,
                    proc: subprocess.Popen[bytes] | None = None,
                    on_status: Callable[[Status], None] | None = None) -> Status:
    """Poll the run's status until it is one of ``targets``.

    ``on_status`` is called once for each status seen, as the run moves (a progress display;
    the caller decides how to show it). If the flow process ends before the run even exists,
    its log explains why (bad input).
    """
    deadline = time.monotonic() + timeout_s
    seen: Status | None = None
    reader = get_reader()  # a poll takes no write lock (SQLite)
    while time.monotonic() < deadline:
        try:
            status = Status(runs.get_run(run_id, reader).status)
        except NotFound:
            status = None
        if on_status is not None and status is not None and status != seen:
            seen = status
            on_status(status)
        if status in targets:
            return status
        if proc is not None and proc.poll() is not None:
            time.sleep(0.2)
            try:
                status = Status(runs.get_run(run_id, reader).status)
            except NotFound:
                raise EhrReleaseError(_last_log_line(run_id)) from None
            if on_status is not None and status != seen:
                on_status(status)
            if status in targets:
                return status
            raise EhrReleaseError(f"the release flow stopped with the run {status}: "
                                  f"{_last_log_line(run_id)}")
        time.sleep(POLL_S)
    raise TimeoutError(f"run {run_id} did not reach {sorted(targets)} within {timeout_s} s")


def _last_log_line(run_id: str) -> str:
    log = run_folder(run_id) / LOG_FILE
    if not log.exists():
        return "the release flow exited without output"
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "the release flow exited without output"


def decide(run_id: str, *, reviewer: str, decision: str, reason: str,
           publisher: Callable[[str], Status] | None = None, channel: str = "cli",
           role: str | None = None) -> Status:
    """Record a decision; an approval starts the publishing flow right here.

    The decision is authoritative and race-safe in the database
    (:func:`ehr_release.storage.runs.decide` refuses self-approval, missing reasons and
    second decisions). No process was waiting for it: the publishing flow runs in the caller
    (``publisher``, default :func:`publish`). Returns the run's status afterwards —
    ``published``, ``rejected``, or ``approved`` when publishing failed (the run shows
    "publication failed" and :func:`publish` retries it).
    """
    expire_overdue(run_id)
    # The refusals that need only the database come before the history re-check, which
    # loads NumPy and pandas: a refused decision answers within a second (issue 37 goal 3).
    runs.check_decision(run_id, reviewer=reviewer, decision=decision, reason=reason)
    if decision == Decision.APPROVE:
        _refuse_broken_history(run_id, reviewer)
    step("record the decision")
    runs.decide(run_id, reviewer=reviewer, decision=decision, reason=reason, channel=channel,
                role=role)
    if decision != Decision.APPROVE:
        from ehr_release.release import bundle

        bundle.discard(run_id)
        return Status.REJECTED
    return (publisher or publish)(run_id)


def _refuse_broken_history(run_id: str, reviewer: str) -> None:
    """Refuse an approval whose release no longer holds with its history: a release of
    overlapping patients parked while this one ran (two flows at once) makes a differencing
    or weakening pair the flow could not see. Audited as ``approval.refused``; value-free."""
    run = runs.find_run(run_id)
    if run is None or run.status != Status.AWAITING_APPROVAL:
        return  # decided meanwhile: runs.decide refuses it in its own words
    step("re-check the release history")
    from ehr_release.history.checks import recheck_before_approval

    try:
        verdict = recheck_before_approval(run_id)
    except EhrReleaseError as exc:  # its parked release cannot be read back: not judged
        message = str(exc)
    else:
        if verdict is None or verdict.holds:
            return
        message = (f"run {run_id} no longer holds with its release history (a release of "
                   "overlapping patients was parked since): reject one of them; "
                   + "; ".join(e.words() for e in verdict.differencing
                               + [w for w, _ in verdict.weaker]))
    record_event(actor=reviewer or "(anonymous)", action=AuditAction.APPROVAL_REFUSED,
                 run_id=run_id, payload={"reason": message, "requested_run": run_id})
    raise ApprovalError(message)


def publish(run_id: str) -> Status:
    """Run the publishing flow for an approved run in this process; its final status.

    Uses ``PREFECT_API_URL``, else this home's local server (:func:`prefect_api`). A failure
    is recorded on the run by the flow (it stays ``approved`` with the reason and a
    ``publish.failed`` event); it is not raised here. Called again — after a crash or once
    the cause is fixed — it retries from the same pinned candidate.
    """
    try:
        run = runs.get_run(run_id)
    except NotFound as exc:
        _refuse_publish(run_id, str(exc), exists=False)
    if run.status not in {Status.APPROVED, Status.PUBLISHED}:
        _refuse_publish(run_id, f"run {run_id} is {run.status}; only an approved run is "
                        "published", exists=True)
    from ehr_release.flows.server import ensure_api_soon
    from ehr_release.tasks import render_aside

    render_aside.start_renderer()  # loads WeasyPrint beside Prefect's start (issue 37)
    step("start the publishing flow (Prefect)")
    # A cold home's server (the steward stopped it, a reboot) starts while Prefect and the
    # flow load here, not after: seconds of an approval's wait (issue 37 goal 3).
    api = ensure_api_soon()
    try:
        from ehr_release.flows.publish import publish_flow

        with prefect_api(api), suppress(Exception), _prefect_console_quiet():
            publish_flow(run_id)  # a failure is recorded on the run
    finally:
        render_aside.stop_renderer()  # a publication that stopped early did not need it
    return Status(runs.get_run(run_id).status)


def _refuse_publish(run_id: str, message: str, *, exists: bool) -> NoReturn:
    """Record an attempt to publish what is not approved (a rejected or unknown run), then
    refuse it: the trail shows every try at publishing, not only the ones that ran.

    The CLI's ``publish`` names no person (it only finishes an approved run's publishing), so
    the actor is the command.
    """
    record_event(actor="ehr-release publish", action=AuditAction.PUBLISH_REFUSED,
                 run_id=run_id if exists else None,
                 payload={"reason": message, "requested_run": run_id})
    raise EhrReleaseError(message)


@contextmanager
def _prefect_console_quiet() -> Iterator[None]:
    """Keep Prefect's console handler from printing a failed publish's tracebacks.

    The publishing flow runs in the deciding process (CLI ``approve``/``publish``, the
    dashboard): its failure is recorded on the run and in the audit trail, and the CLI
    prints that one line; Prefect's console handler would print two tracebacks before it.
    Prefect's own log store (its API handler) still receives them.
    """
    import logging

    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger(name) for name in list(logging.Logger.manager.loggerDict)
               if name.startswith("prefect")]
    handlers = {h for lg in [logging.getLogger(), *loggers] for h in lg.handlers
                if isinstance(h, PrefectConsoleHandler)}
    levels = {h: h.level for h in handlers}
    for h in handlers:
        h.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for h, level in levels.items():
            h.setLevel(level)


def expire_overdue(run_id: str | None = None) -> list[str]:
    """Reject runs whose approval window closed without a decision (one run, or all).

    The window is data (``pending_releases.expires_at``), not a sleeping process: it is
    enforced whenever someone looks — a decision, ``status``, ``list``, the dashboard.
    """
    rows = ([r] if (r := pending.get_pending(run_id)) else []) if run_id else \
        pending.pending_runs()
    expired = []
    for row in rows:
        if not pending.is_expired(row):
            continue
        try:
            runs.transition(row.run_id, Status.REJECTED, actor=TIMEOUT_ACTOR,
                            payload={"reason": f"no decision by {row.expires_at}"})
        except (IllegalTransition, NotFound):
            continue  # decided, failed or gone meanwhile
        from ehr_release.release import bundle

        bundle.discard(row.run_id)
        expired.append(row.run_id)
    return expired


def run_state(run_id: str) -> RunState:
    """The run's status, ``stalled`` when no live flow works on an unsettled run (the rules:
    :func:`ehr_release.storage.run_view.state_of`)."""
    run = runs.get_run(run_id)

    def window_closes() -> str | None:
        row = pending.get_pending(run_id)
        return row.expires_at if row else None

    return state_of(run, window_closes=window_closes,
                    lease_alive=lambda: pending.lease_alive(run_id))


def saved_request(run_id: str) -> ReleaseRequest:
    """The request a run was started with (kept beside its work files for resuming)."""
    path = request_path(run_id)
    if not path.exists():
        raise NotFound(f"no saved request for run {run_id!r} in {home()}")
    from ehr_release.planning.request import ReleaseRequest

    return ReleaseRequest.model_validate_json(path.read_text())


def request_from_cli(*, input_path: Path, diagnoses: Path | None, admissions: Path | None,
                     class_column: str | None, algorithm: str, params: dict[str, str],
                     requester: str, out_dir: Path | None, approval_timeout_s: int | None,
                     expected_fingerprint: str | None = None,
                     task_runner: str = "threads", recipient: str | None = None,
                     purpose: str | None = None, terms: str | None = None,
                     expires: str | None = None, allow_empty: bool = False,
                     allow_low_utility: bool = False,
                     source: str = "default",
                     code_system: str | None = None,
                     code_mapping: str | None = None,
                     run_id: str | None = None) -> ReleaseRequest:
    """The request a command's options describe; ``run_id`` if drawn already (``run``
    starts the flow process on it), else a new one."""
    from ehr_release.planning.request import ReleaseRequest, check_runner_spec

    return ReleaseRequest(run_id=run_id or runs.new_run_id(), input_path=str(input_path),
                          diagnoses_path=str(diagnoses) if diagnoses else None,
                          admissions_path=str(admissions) if admissions else None,
                          class_column=class_column, algorithm=algorithm, params=params,
                          requester=requester, out_dir=str(resolve_destination(out_dir)),
                          approval_timeout_s=approval_timeout_s,
                          expected_fingerprint=expected_fingerprint,
                          task_runner=check_runner_spec(task_runner), recipient=recipient,
                          purpose=purpose, terms=terms, expires=expires,
                          allow_empty=allow_empty, allow_low_utility=allow_low_utility,
                          source=source, code_system=code_system,
                          code_mapping=code_mapping)
