"""Task runners: the spec is validated, and Dask runs the data-parallel stage correctly.

The Dask test runs disassociation with tiny VerPart batches and counting partitions so the
per-cluster work, the verifier's itemset counting (m = 3) and the utility's reconstructions
really are spread over worker processes, and checks the release
and its utility figures are identical to what the thread runner makes from the same seed.
"""

from __future__ import annotations

import pytest

from ehr_release.core.errors import ParameterError
from ehr_release.flows.runners import make_task_runner
from ehr_release.planning.request import check_runner_spec
from ehr_release.storage import runs
from ehr_release.storage.runs import Status
from tests.flow_helpers import decide, wait_status


@pytest.mark.parametrize("spec", ["threads", "threads:4", "dask", "dask:2",
                                  "tcp://10.0.0.5:8786", "tls://sched.example:8786"])
def test_accepted_specs(spec: str) -> None:
    assert check_runner_spec(spec) == spec


@pytest.mark.parametrize("spec", ["", "thread", "dask:0", "dask:x", "http://x:1",
                                  "tcp://a b", "threads:-1", "dask;rm -rf"])
def test_refused_specs_name_the_parameter(spec: str) -> None:
    with pytest.raises(ParameterError, match="task_runner"):
        check_runner_spec(spec)


def test_runner_types() -> None:
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    assert isinstance(make_task_runner("threads:3"), ThreadPoolTaskRunner)
    assert isinstance(make_task_runner("dask:2"), DaskTaskRunner)
    assert make_task_runner("tcp://127.0.0.1:8786").address == "tcp://127.0.0.1:8786"


def _release(env, spec: str, monkeypatch) -> tuple[bytes, int]:
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    from ehr_release.algorithms.disassociation import core
    from ehr_release.flows.release import release_flow
    from ehr_release.planning.request import ReleaseRequest
    from ehr_release.samples.sample import generate_sample, write_sample

    data, out = env
    sample = data.with_name("sample.csv")
    write_sample(generate_sample(600, seed=7), sample)
    monkeypatch.setattr(core, "BATCH_CLUSTERS", 4)  # many small batches: real fan-out
    from ehr_release.privacy import itemset_counts

    monkeypatch.setattr(itemset_counts, "PARTITION_ROWS", 100)  # verification counting too
    request = ReleaseRequest(run_id=runs.new_run_id(), input_path=str(sample),
                             algorithm="disassociation",
                             params={"k": "3", "m": "3", "seed": "11"}, requester="steward",
                             out_dir=str(out), approval_timeout_s=300, task_runner=spec)
    flow = release_flow.with_options(task_runner=make_task_runner(spec))
    import threading

    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("r", flow(request)), daemon=True)
    thread.start()
    assert wait_status(request.run_id, {Status.AWAITING_APPROVAL, Status.FAILED},
                       timeout=240) == Status.AWAITING_APPROVAL
    decide(request.run_id, "approve")
    thread.join(timeout=120)
    assert runs.get_run(request.run_id).status == Status.PUBLISHED
    with get_client(sync_client=True) as client:
        flow_run_id = runs.get_run(request.run_id).flow_run_id
        tasks = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            sort=TaskRunSort.EXPECTED_START_TIME_DESC, limit=200, offset=0)
    batches = sum(t.name.startswith("disassociation-verpart-batch") for t in tasks)
    recons = sum(t.name.startswith("disassociation-reconstruction") for t in tasks)
    # 5 reconstructions for the default estimates, 5 for the paper's MRE variant (issue 19);
    # threads: no gain under the GIL
    assert recons == (10 if spec.startswith("dask") else 0)
    counts = sum(t.name.startswith("disassociation-verify-counts") for t in tasks)
    assert (counts >= 2) if spec.startswith("dask") else (counts == 0)
    utility = runs.latest_utility(request.run_id)["metrics"]
    release = (out / "releases" / request.run_id / "release.parquet").read_bytes()
    return release + repr(sorted(utility.items())).encode(), batches


@pytest.mark.slow
def test_dask_spreads_the_work_and_gives_the_same_release_and_utility(env, monkeypatch
                                                                     ) -> None:
    on_threads, thread_batches = _release(env, "threads", monkeypatch)
    on_dask, dask_batches = _release(env, "dask:2", monkeypatch)
    assert dask_batches >= 2 and thread_batches == 0
    assert on_dask == on_threads


def test_deployment_entry_point_runs_the_release_on_the_requested_runner(env, monkeypatch
                                                                          ) -> None:
    """What a worker runs for a UI-started deployment run: the runner comes from the request,
    the flow ends with the run parked for its reviewer, and the decision publishes it."""
    import dataclasses
    import threading

    from prefect.context import FlowRunContext

    from ehr_release import registry
    from ehr_release.flows.deployment import governed_release
    from tests import doubles
    from tests.flow_helpers import request_for

    seen: list[object] = []

    def probing(dataset, params, rng):
        seen.append(FlowRunContext.get().task_runner)
        return doubles.CODE_COUNTS.anonymize(dataset, params, rng)

    probe = dataclasses.replace(doubles.CODE_COUNTS, name="runner-probe", anonymize=probing)
    entries = {**registry._entries(), probe.name: probe}
    monkeypatch.setattr(registry, "_entries", lambda: entries)
    data, out = env
    request = request_for(data, out, algorithm="runner-probe", task_runner="threads:3")
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("r", governed_release(request)),
                              daemon=True)
    thread.start()
    assert wait_status(request.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL
    thread.join(timeout=120)
    assert box.get("r") == "awaiting_approval"  # nothing waits for the reviewer
    assert decide(request.run_id, "approve") == Status.PUBLISHED
    from prefect.task_runners import ThreadPoolTaskRunner

    (runner,) = seen
    assert isinstance(runner, ThreadPoolTaskRunner) and runner._max_workers == 3


def test_items_sent_to_workers_leave_the_parent_task_parameters_behind(env) -> None:
    """Prefect ships the caller's task context with each submission; ours drops its inputs."""
    from prefect import task
    from prefect.context import serialize_context

    from ehr_release.registry.disassociation import _parent_without_parameters

    @task(persist_result=False)
    def parent(dataset: str) -> tuple[dict, dict]:
        shipped = serialize_context()["task_run_context"]["parameters"]
        with _parent_without_parameters():
            trimmed = serialize_context()["task_run_context"]["parameters"]
        return shipped, trimmed

    shipped, trimmed = parent("x" * 1000)
    assert shipped == {"dataset": "x" * 1000}
    assert trimmed == {}
