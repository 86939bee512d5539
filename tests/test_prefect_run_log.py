"""Issue 34 finding 6: Prefect shows the work (slow: Prefect harness, a real algorithm).

Found: a three-minute ArtUC flow left 15 log lines, all Prefect's own "Finished in state
Completed()"; task runs were named by hash suffixes or absolute paths; the verification
artifact's table was cut off. One disassociation release of the bundled sample
(``generate-sample``) is requested and approved; then its two flow runs are read back from
Prefect's API: the project's INFO line for every stage, names and tags, narrow tables —
and not one value of the input (patient id, code, demographic value) in any logged line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ehr_release.samples.sample import generate_sample, write_sample
from ehr_release.storage import runs
from ehr_release.storage.runs import Status
from ehr_release.tasks.steps import listening
from tests.flow_helpers import request_for, run_approved

pytestmark = pytest.mark.slow

#: Each stage's own line (``<stage>: …``, :func:`ehr_release.tasks.logs.stage_log`).
STAGES = ("release", "ingest", "link-extract", "anonymize", "pin-candidate", "verify",
          "attack audit", "history", "evaluate", "certify", "park", "status", "publish")


def _input_values(extract) -> set[str]:
    """Every patient id, code and demographic word of the extract.

    Codes made of digits only (3-digit categories such as ``780``) are left out: they are
    indistinguishable from the figures the lines are meant to carry (``1,780 bytes``), and
    ages are numbers for the same reason. Every other code has a dot or a letter.
    """
    values = {str(p) for p in extract.patient_ids}
    values |= {c for c in extract.diagnoses["code"].astype(str) if not c.isdigit()}
    for column in extract.patients.columns:
        values |= {v for v in extract.patients[column].dropna().astype(str)
                   if len(v) >= 4 and not v.replace(".", "").isdigit()}
    return values


def _read_back(run_id: str):
    from prefect import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterTags,
        LogFilter,
        LogFilterFlowRunId,
        TaskRunFilter,
        TaskRunFilterFlowRunId,
    )
    from prefect.client.schemas.sorting import ArtifactSort, FlowRunSort, LogSort, TaskRunSort
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()  # send what the flows logged before reading it back
    with get_client(sync_client=True) as client:
        flows = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[f"run:{run_id}"])),
            sort=FlowRunSort.START_TIME_DESC, limit=10, offset=0)
        ids = [f.id for f in flows]
        tasks = client.read_task_runs(task_run_filter=TaskRunFilter(
            flow_run_id=TaskRunFilterFlowRunId(any_=ids)),
            sort=TaskRunSort.EXPECTED_START_TIME_ASC, limit=200, offset=0)
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)),
                                limit=200, offset=0, sort=LogSort.TIMESTAMP_ASC)
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=ids)),
            flow_run_filter=FlowRunFilter(), task_run_filter=TaskRunFilter(),
            sort=ArtifactSort.CREATED_DESC, limit=200, offset=0)
    return flows, tasks, logs, artifacts


def test_the_flow_log_tells_the_work_in_figures_and_no_input_value(harness, test_site,
                                                                   cpu_free, aside_stopped,
                                                                   tmp_path: Path) -> None:
    extract = generate_sample(60, seed=4)
    data = tmp_path / "sample.csv"
    write_sample(extract, data)
    req = request_for(data, tmp_path / "out", "disassociation")
    req = req.model_copy(update={"params": {"k": "3", "m": "2", "seed": "1"}})
    steps: list[str] = []
    with listening(steps.append):  # the decision is taken, and published, in this thread
        assert run_approved(req)["result"] == Status.PUBLISHED
    assert steps == ["re-check the release history", "record the decision",
                     "start the publishing flow (Prefect)",
                     "read back the pinned candidate", "check the approval and the pinned files",
                     "render the final certificate and datasheet",
                     "write, fsync and rename the release folder",
                     "file the certificate and record the publication"]
    assert runs.get_run(req.run_id).status == Status.PUBLISHED

    flows, tasks, logs, artifacts = _read_back(req.run_id)
    assert sorted(f.name for f in flows) == [f"publish-{req.run_id}", f"release-{req.run_id}"]
    tags = {"algorithm:disassociation", f"run:{req.run_id}", "source:default"}
    assert all(tags <= set(f.tags) for f in flows), [f.tags for f in flows]

    ours = [lg.message for lg in logs if lg.name.startswith("prefect.") and ": " in lg.message
            and lg.message.split(": ", 1)[0] in STAGES]
    assert {m.split(": ", 1)[0] for m in ours} == set(STAGES), ours
    from ehr_release.runtime.cpus import usable_cpus

    if usable_cpus() >= 2:  # rendered beside the flow's start (issue 37 goal 3)
        assert any("final certificate" in m and "rendered in the second process" in m
                   for m in ours), ours
    anonymized = next(m for m in ours if m.startswith("anonymize: "))
    assert "disassociation k=3 m=2" in anonymized and re.search(r"in \d+\.\d s$", anonymized)

    values = _input_values(extract)
    assert "S000001" in values or any(v.startswith("S0") for v in values)
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(values))) + r")(?![\w.])")
    leaked = [lg.message for lg in logs if pattern.search(lg.message)]
    assert leaked == [], leaked

    assert tasks
    for task in tasks:
        assert "/" not in task.name and not re.search(r"-[0-9a-f]{3}$", task.name), task.name
        # untagged on purpose: each task-run tag costs a concurrency lease per task in
        # Prefect 3.8, and a failed lease failed a release under load (flows/tagging.py)
        assert not task.tags, (task.name, task.tags)

    shown = {a.key: str(a.data) for a in artifacts}
    assert "PASS" in shown["ehr-verification"]
    for key, markdown in shown.items():
        for line in markdown.splitlines():
            if line.startswith("|"):
                assert line.count(" | ") + 1 <= 4, (key, line)
