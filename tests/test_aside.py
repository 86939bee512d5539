"""The flow's second process (issue 18 goal 1): what it computes is what the stage would
compute in place, a worker that is gone leaves the work to the stage, and a run that fails
verification stops it without waiting for its report."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from ehr_release.documents.certificate import CertificateContext, render_certificate_pdf
from ehr_release.model.reports import Requirement, UtilityReport, VerificationReport
from ehr_release.planning.plan import make_plan
from ehr_release.registry import get as get_algorithm
from ehr_release.storage import runs
from ehr_release.storage.runs import Status
from ehr_release.tasks import aside
from tests.flow_helpers import decide, request_for, start, wait_status

pytestmark = pytest.mark.usefixtures("aside_stopped", "cpu_free")
_REAL_CPU_FREE = aside._cpu_free


@pytest.fixture
def data(flow_csv: Path) -> Path:
    return flow_csv


def _report_json(report: UtilityReport) -> str:
    return json.dumps(report.to_dict(), sort_keys=True, default=repr, allow_nan=True)


def _seeded_plan(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A plan, and its request written where a worker can read it."""
    monkeypatch.setenv("EHR_RELEASE_TEST_MODE", "1")
    request = request_for(data, tmp_path / "out", algorithm="disassociation")
    request = request.model_copy(update={"params": {"k": "3", "m": "2", "seed": "11"}})
    path = tmp_path / "request.json"
    path.write_text(request.model_dump_json())
    return make_plan(request), path


def test_the_worker_reads_the_input_of_its_request_only(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, path = _seeded_plan(data, tmp_path, monkeypatch)
    assert aside.start_worker(path)
    dataset, fingerprint = aside.take_input(plan.request)
    assert fingerprint == plan.fingerprint == dataset.fingerprint()
    assert make_plan(plan.request, dataset, fingerprint=fingerprint).fingerprint == plan.fingerprint
    assert aside.take_input(plan.request) is None  # taken once
    aside.stop_worker()
    assert aside.start_worker(path)
    other = plan.request.model_copy(update={"params": {"k": "4"}})
    assert aside.take_input(other) is None  # it read another request: read it in place
    aside.stop_worker()
    path.write_text(
        plan.request.model_copy(update={"input_path": str(tmp_path / "none.csv")}).model_dump_json()
    )
    assert aside.start_worker(path)
    assert aside.take_input(plan.request) is None  # a failed read: the head start meets it
    assert aside._worker is not None  # and the worker still serves the jobs


def test_the_report_evaluated_aside_is_the_one_evaluated_in_place(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, path = _seeded_plan(data, tmp_path, monkeypatch)
    entry = plan.entry
    files = entry.anonymize(plan.dataset, plan.stage_params(), np.random.default_rng(3))
    here = entry.evaluate(files, plan.dataset, plan.stage_params(), plan.rng())
    assert aside.start_worker(path)  # its input is not taken: the job's result is read all the same
    assert aside.begin_evaluation(plan, files)
    assert not aside.begin_evaluation(plan, files)  # one job out at a time
    assert aside.take_evaluation("rel-other") is None  # handed over for another run
    there = aside.take_evaluation(plan.run_id)
    assert there is not None
    assert _report_json(there) == _report_json(here)
    assert [c.png for c in there.charts] == [c.png for c in here.charts]
    assert aside.take_evaluation(plan.run_id) is None  # taken once


def test_the_worker_evaluates_on_its_own_copy_of_the_data_it_read(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, path = _seeded_plan(data, tmp_path, monkeypatch)
    files = plan.entry.anonymize(plan.dataset, plan.stage_params(), np.random.default_rng(3))
    here = plan.entry.evaluate(files, plan.dataset, plan.stage_params(), plan.rng())
    assert aside.start_worker(path)
    dataset, fingerprint = aside.take_input(plan.request)
    lent = make_plan(plan.request, dataset, fingerprint=fingerprint)
    sent: list[object] = []
    monkeypatch.setattr(aside, "_send", lambda conn, job: sent.append(job) or conn.send(job))
    assert aside.begin_evaluation(lent, files)
    there = aside.take_evaluation(plan.run_id)
    assert sent[0][1][3] is None  # the data did not go back to it
    assert there is not None and _report_json(there) == _report_json(here)


def test_an_evaluation_is_pending_until_its_report_is_in(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow loads the certificate's renderer while it waits for the evaluation only if
    there is a wait: pending is true from the hand-over until the report has arrived."""
    plan, path = _seeded_plan(data, tmp_path, monkeypatch)
    files = plan.entry.anonymize(plan.dataset, plan.stage_params(), np.random.default_rng(3))
    assert not aside.evaluation_pending(plan.run_id)  # no worker
    assert aside.start_worker(path)
    dataset, fingerprint = aside.take_input(plan.request)
    plan = make_plan(plan.request, dataset, fingerprint=fingerprint)
    assert not aside.evaluation_pending(plan.run_id)  # nothing handed over
    assert aside.begin_evaluation(plan, files)
    assert aside.evaluation_pending(plan.run_id)  # an evaluation takes more than an instant
    assert not aside.evaluation_pending("rel-other")
    deadline = time.monotonic() + 120
    while aside.evaluation_pending(plan.run_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not aside.evaluation_pending(plan.run_id)  # its report is in the pipe
    assert aside.take_evaluation(plan.run_id) is not None
    assert not aside.evaluation_pending(plan.run_id)


def test_an_unseeded_run_is_evaluated_with_the_workers_own_stream(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a seed the run's stream is OS entropy wherever it is drawn: the flow sends
    none, and the worker evaluates with the stream it derived the workloads from ahead."""
    plan, path = _seeded_plan(data, tmp_path, monkeypatch)
    request = plan.request.model_copy(update={"params": {"k": "3", "m": "2"}})
    path.write_text(request.model_dump_json())
    plan = make_plan(request)
    files = plan.entry.anonymize(plan.dataset, plan.stage_params(), np.random.default_rng(3))
    here = plan.entry.evaluate(files, plan.dataset, plan.stage_params(), plan.rng())
    assert aside.start_worker(path)
    sent: list[object] = []
    monkeypatch.setattr(aside, "_send", lambda conn, job: sent.append(job) or conn.send(job))
    assert aside.begin_evaluation(plan, files)
    there = aside.take_evaluation(plan.run_id)
    assert sent[0][1][5] is None  # no stream sent
    assert there is not None
    assert there.metrics.keys() == here.metrics.keys()
    assert there.metrics["records"] == here.metrics["records"]


def test_the_certificate_rendered_aside_has_the_same_bytes(tmp_path: Path) -> None:
    utility = UtilityReport("demo", {"ARE (W1)": 0.125, "records": 1000.0})
    ctx = CertificateContext(
        run_id="rel-" + "0" * 32,
        created_at=datetime(2026, 11, 22, 9, 30, tzinfo=UTC),
        requester="steward-a",
        dataset_source="patients.csv",
        dataset_fingerprint="ab" * 32,
        dataset_rows=1000,
        dataset_schema={"age": "Int64", "codes": "multiset[icd9]"},
        algorithm="demo",
        algorithm_summary="a demo",
        privacy_model="k^m-anonymity",
        parameters={"k": 5},
        utility=utility,
        verification=VerificationReport("demo", [Requirement("k", "≥ 5", "7", True)]),
        manifest=[("release.json", "cd" * 32, 4321)],
        approval=None,
        audit_head="ef" * 32,
        audit_events=12,
        status="verified — awaiting reviewer decision",
    )
    assert aside.start_worker(tmp_path / "no-request.json")  # reads nothing, renders all the same
    assert aside.begin_certificate(ctx.run_id, ctx)
    assert aside.take_certificate(ctx.run_id) == render_certificate_pdf(ctx)
    # the worker serves the next job too (the same run's retried certificate, say)
    other = dataclasses.replace(ctx, requester="steward-b")
    assert aside.begin_certificate(ctx.run_id, other)
    assert aside.take_certificate(ctx.run_id) == render_certificate_pdf(other)


def test_a_worker_that_is_gone_leaves_the_work_to_the_stage(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, path = _seeded_plan(data, tmp_path, monkeypatch)
    files = plan.entry.anonymize(plan.dataset, plan.stage_params(), np.random.default_rng(3))
    assert aside.start_worker(path)
    process = aside._worker.process
    assert aside.begin_evaluation(plan, files)
    process.kill()
    assert aside.take_evaluation(plan.run_id) is None
    assert aside._worker is None and not process.is_alive()
    assert not aside.begin_evaluation(plan, files)  # no worker: the stage evaluates in place


def test_a_failed_job_leaves_the_work_to_the_stage(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, path = _seeded_plan(data, tmp_path, monkeypatch)
    assert aside.start_worker(path)
    assert aside.begin_evaluation(plan, {"not-the-release.json": b"{}"})
    assert aside.take_evaluation(plan.run_id) is None  # the stage meets the error itself
    assert aside._worker is None


def test_a_failed_verification_stops_the_worker_without_its_report(env) -> None:
    data, out = env
    req = request_for(data, out, algorithm="leaky-code-counts")
    path = out.parent / "request.json"
    path.write_text(req.model_dump_json())
    assert aside.start_worker(path)
    process = aside._worker.process
    thread, box = start(req)
    thread.join(120)
    assert "verification failed" in str(box.get("error"))
    assert runs.get_run(req.run_id).status == Status.FAILED
    assert runs.latest_utility(req.run_id) is None  # never evaluated, nor recorded
    assert aside._worker is None and not process.is_alive()
    assert not (out / "releases").exists()


def test_a_run_takes_its_evaluation_and_certificate_from_the_worker(
    env, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, out = env
    entry = get_algorithm("disassociation")

    def not_here(*args: object, **kwargs: object) -> None:
        raise AssertionError("evaluated in the flow process")

    real = entry.evaluate
    object.__setattr__(entry, "evaluate", not_here)  # this process's entry only (frozen)
    try:
        req = request_for(data, out, algorithm="disassociation")
        path = out.parent / "request.json"
        path.write_text(req.model_dump_json())
        assert aside.start_worker(path)
        thread, box = start(req)
        assert (
            wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED})
            == Status.AWAITING_APPROVAL
        )
    finally:
        object.__setattr__(entry, "evaluate", real)
    assert runs.latest_utility(req.run_id) is not None
    assert aside._worker is None  # stopped once the certificate was rendered
    decide(req.run_id, "reject")
    thread.join(120)
    assert box.get("result") == "rejected", box


_HOLDS_STDOUT = """
import os, sys
from multiprocessing import resource_tracker
from pathlib import Path
from ehr_release.tasks import aside

aside._cpu_free = lambda: True  # whatever the load of the machine running the test
aside.start_worker(Path(sys.argv[1]))
mine = os.readlink("/proc/self/fd/1")
pids = [aside._worker.process.pid, resource_tracker._resource_tracker._pid]
print(sum(os.readlink(f"/proc/{pid}/fd/1") == mine for pid in pids if pid))
aside.stop_worker()
"""


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc")
def test_no_child_holds_the_pipe_the_cli_reads_ready_from(tmp_path: Path) -> None:
    """The CLI reads one line, or the end, of the flow process's stdout: a child holding it
    would keep the CLI waiting when the flow process dies before ``ready``."""
    done = subprocess.run(
        [sys.executable, "-c", _HOLDS_STDOUT, str(tmp_path / "no-request.json")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.stdout.strip() == "0", done.stderr


def _fake_proc(root: Path, states: dict[int, str]) -> Path:
    for pid, state in states.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} (some (odd) name) {state} 1 2 3\n")
    (root / "loadavg").write_text("1.0 1.0 1.0 2/100 4242\n")  # not a process: skipped
    return root


@pytest.mark.parametrize(("states", "free"), [
    ({}, True),  # this run's own processes alone
    ({101: "S", 102: "D", 103: "Z"}, True),  # others asleep, waiting on disk, gone
    ({101: "R"}, False),  # another program holds the second CPU
])
def test_the_worker_starts_only_on_a_free_cpu(
        states: dict[int, str], free: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ehr_release.runtime import cpus

    monkeypatch.setattr(cpus, "usable_cpus", lambda: 2)
    # this process and its parent are running, as the CLI and the flow process are
    running_here = {os.getpid(): "R", os.getppid(): "R"}
    monkeypatch.setattr(aside, "_PROC", _fake_proc(tmp_path / "proc", running_here | states))
    monkeypatch.setattr(aside, "_cpu_free", _REAL_CPU_FREE)
    assert aside._cpu_free() is free
    assert aside.start_worker(tmp_path / "no-request.json") is free


def test_a_program_runnable_for_one_look_only_leaves_the_cpu_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A service waking for a moment is not a busy CPU; a program runnable in every look
    is (the looks' gap replaced by the moment the service goes back to sleep)."""
    from ehr_release.runtime import cpus

    monkeypatch.setattr(cpus, "usable_cpus", lambda: 2)
    proc = _fake_proc(tmp_path / "proc", {os.getpid(): "R", os.getppid(): "R", 101: "R"})
    monkeypatch.setattr(aside, "_PROC", proc)
    looks: list[int] = []
    monkeypatch.setattr(aside, "_wait_between_looks", lambda: looks.append(1))
    assert _REAL_CPU_FREE() is False  # runnable in each look
    assert len(looks) == aside.CPU_LOOKS - 1
    asleep = "101 (some (odd) name) S 1 2 3\n"
    monkeypatch.setattr(aside, "_wait_between_looks",
                        lambda: (proc / "101" / "stat").write_text(asleep))
    (proc / "101" / "stat").write_text("101 (some (odd) name) R 1 2 3\n")
    assert _REAL_CPU_FREE() is True  # runnable in the first look only


def test_an_unreadable_proc_counts_as_free(tmp_path: Path, monkeypatch) -> None:
    from ehr_release.runtime import cpus

    monkeypatch.setattr(cpus, "usable_cpus", lambda: 2)
    monkeypatch.setattr(aside, "_PROC", tmp_path / "no-proc")
    assert _REAL_CPU_FREE() is True
