"""A failure never hands Prefect a patient value: not in a state message, a log line or a
traceback it stores (``ehr_release.tasks.redaction``)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import pytest
from sqlalchemy.exc import OperationalError

from ehr_release.core.errors import InputError
from ehr_release.storage import runs
from ehr_release.storage.runs import Status
from ehr_release.tasks.redaction import MARK, RedactedError, redact, redacted
from tests import doubles
from tests.flow_helpers import CSV, copies_of, request_for, start

MARKER = "MRNREDACT777"


def _prefect_texts(run_id: str) -> list[str]:
    """Everything Prefect stored about the run's flow: the run, its task runs, its logs."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterName,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.client.schemas.sorting import FlowRunSort, LogSort, TaskRunSort
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)  # logs travel in batches: send what is pending first
    with get_client(sync_client=True) as client:
        flows = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[f"release-{run_id}"])),
            sort=FlowRunSort.START_TIME_DESC, limit=5, offset=0)
        ids = [f.id for f in flows]
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids)),
                                      sort=TaskRunSort.EXPECTED_START_TIME_DESC, limit=200,
                                      offset=0)
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)),
                                limit=200, offset=0, sort=LogSort.TIMESTAMP_ASC)
    assert flows and logs, "the flow ran and logged"
    return ([f.model_dump_json() for f in flows] + [t.model_dump_json() for t in tasks]
            + [lg.message for lg in logs])


def test_a_refused_input_reaches_prefect_without_its_detail(env, tmp_path):
    """The flow re-reads the file; its refusal quotes the bad cell on the terminal only."""
    _, out = env
    bad = tmp_path / "bad.csv"
    bad.write_text(f"patient_id,age,codes\nP1,40,401.9\nP2,{MARKER},250\n")
    req = request_for(bad, out)
    thread, box = start(req)
    thread.join(120)
    assert isinstance(box.get("error"), InputError)  # the type survives: callers still see it
    texts = _prefect_texts(req.run_id)
    assert any("age is not a number" in t for t in texts)
    assert not [t for t in texts if MARKER in t]


def test_a_bug_quoting_a_patient_reaches_prefect_as_its_type_and_place(env, monkeypatch):
    from ehr_release import registry

    data, out = env
    data.write_text(CSV.replace("S0", MARKER))

    def evaluate(files, dataset, params, rng):
        raise KeyError(next(p for p in dataset.patients.index if MARKER in str(p)))

    buggy = dataclasses.replace(doubles.CODE_COUNTS, name="buggy", evaluate=evaluate)
    table = {**registry._entries(), "buggy": buggy}
    monkeypatch.setattr(registry, "_entries", lambda: table)
    req = request_for(data, out, algorithm="buggy")
    thread, box = start(req)
    thread.join(120)
    assert isinstance(box.get("error"), RedactedError)
    assert runs.get_run(req.run_id).status == Status.FAILED
    texts = _prefect_texts(req.run_id)
    assert any("KeyError at test_redaction.py" in t for t in texts)
    assert not [t for t in texts if MARKER in t]
    assert MARKER not in (runs.get_run(req.run_id).error or "")


def test_transient_failures_stay_retryable_and_causes_are_dropped() -> None:
    try:
        try:
            raise ConnectionError("server closed the connection unexpectedly\nDETAIL: x")
        except ConnectionError as cause:
            raise OperationalError(f"INSERT '{MARKER}'", {"id": MARKER}, cause) from cause
    except OperationalError as exc:
        clean = redact(exc)
    assert isinstance(clean, RedactedError) and clean.transient
    assert str(clean).endswith(": server closed the connection unexpectedly")  # the reason
    assert MARKER not in str(clean) and clean.__cause__ is None and clean.__context__ is None
    assert not redact(KeyError(MARKER)).transient
    quoted = InputError("duplicate patient id", file="x.csv", row=2, detail=MARKER)
    assert redact(quoted) is quoted and MARKER not in str(quoted) and quoted.detail is None


def test_redacted_passes_results_and_raises_redacted() -> None:
    @redacted
    def double(x: int) -> int:
        if x < 0:
            raise ValueError(f"negative: {MARKER}")
        return 2 * x

    assert double(2) == 4
    with pytest.raises(RedactedError, match="ValueError at test_redaction.py") as info:
        double(-1)
    assert MARKER not in str(info.value)


def _prefect_objects():
    from prefect import Flow, Task

    import ehr_release.flows
    import ehr_release.tasks

    for package in (ehr_release.flows, ehr_release.tasks):
        for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            for value in vars(importlib.import_module(module.name)).values():
                if isinstance(value, Task | Flow):
                    yield value


def test_every_task_and_flow_of_the_package_is_redacted() -> None:
    found = {obj.name: getattr(obj.fn, MARK, False) for obj in _prefect_objects()}
    assert len(found) >= 14, sorted(found)
    assert [name for name, marked in found.items() if not marked] == []


def test_a_failed_candidate_leaves_no_copy_behind(env, ehr_home, tmp_path):
    """A release refused for carrying raw ids: its bytes were cached for a resume, in the
    run's own folder, and go with the run — not left in Prefect's result storage."""
    import os
    from pathlib import Path

    _, out = env
    data = tmp_path / "marked.csv"
    data.write_text(CSV.replace("S0", MARKER))
    req = request_for(data, out, algorithm="undeclared-ids")
    thread, box = start(req)
    thread.join(120)
    assert runs.get_run(req.run_id).status == Status.FAILED
    assert copies_of(MARKER, [ehr_home, out, Path(os.environ["PREFECT_HOME"])]) == []
