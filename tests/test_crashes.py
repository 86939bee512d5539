"""SIGKILL the flow process at every stage boundary and inside anonymize and publish.

After each kill: nothing under ``releases/`` that the database does not record (a folder
renamed but not recorded is *reported* by ``audit verify``), the run is not published, the
audit chain verifies, and re-running the same request resumes and publishes exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ehr_release.governance.integrity import check_integrity
from ehr_release.storage import runs
from ehr_release.storage.audit import export_events, verify_chain
from ehr_release.storage.runs import Status
from tests.flow_helpers import decide, request_for, start, wait_status

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]

BEFORE_APPROVAL = ["in:anonymize", "after:anonymized", "after:verified", "after:evaluated",
                   "after:certified", "after:awaiting_approval"]
AFTER_APPROVAL = ["in:publish", "after-rename"]


def _kill_at(request, point: str, *, approve: bool) -> None:
    from prefect.settings import PREFECT_API_URL

    path = Path(request.out_dir).parent / f"{request.run_id}.json"
    path.write_text(request.model_dump_json())
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    proc = subprocess.Popen([sys.executable, "-m", "tests.crash_driver", str(path), point],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.wait(timeout=180)
    finally:
        proc.kill()
    err = proc.stderr.read().decode(errors="replace")[-2000:]
    assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {err}"


@pytest.mark.parametrize("point", BEFORE_APPROVAL + AFTER_APPROVAL)
def test_kill_then_resume_publishes_exactly_once(env, point: str) -> None:
    data, out = env
    request = request_for(data, out)
    _kill_at(request, point, approve=point in AFTER_APPROVAL)

    run = runs.get_run(request.run_id)
    assert run.status != Status.PUBLISHED
    assert verify_chain().ok
    problems, _ = check_integrity()
    folder = out / "releases" / request.run_id
    if point == "after-rename":
        assert folder.exists() and any("not published" in p for p in problems), problems
    else:
        assert not folder.exists()
        assert problems == []

    from ehr_release.service import publish, run_state

    if point in BEFORE_APPROVAL:
        if run.status != Status.AWAITING_APPROVAL:  # parked runs need no process at all
            state = run_state(request.run_id)
            assert state.stalled and "ehr-release resume" in state.next_step
            thread, box = start(request)  # the same request: resume
            assert wait_status(request.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) \
                == Status.AWAITING_APPROVAL
        decide(request.run_id, "approve")
        if run.status != Status.AWAITING_APPROVAL:
            thread.join(180)
            assert box.get("result") == "published", box
    else:  # killed while publishing: the approved run is stalled; publishing again finishes
        state = run_state(request.run_id)
        assert state.stalled and f"ehr-release publish {request.run_id}" in state.next_step
        assert publish(request.run_id) == Status.PUBLISHED
    assert check_integrity()[0] == []
    assert not list((out / "releases").glob(".staging-*"))
    actions = [json.loads(e)["action"] for e in export_events(request.run_id, "jsonl")
               .splitlines()]
    assert actions.count("run.published") == 1
    # Only a restarted release flow is a resumption (a parked run or a publish is not).
    assert actions.count("run.resumed") == (1 if point in BEFORE_APPROVAL
                                            and run.status != Status.AWAITING_APPROVAL else 0)
    assert sorted(p.name for p in folder.iterdir()) == ["counts.json", "datasheet.pdf",
                                                        "manifest.json"]
