"""Issue 33 item 7: a failure while publishing no longer kills an approved run for good.

Before: disk full or a destination that broke at publish time moved the run to ``failed``
(terminal) and discarded its candidate; ``publish`` and ``resume`` refused once the cause was
fixed, and only a new request — a new draw, spending ε again — could release the data. Now the
run stays ``approved``, shown as "publication failed" with the stored (value-free) reason and a
``publish.failed`` event; ``ehr-release publish RUN`` (or ``resume``, or the dashboard's retry
button for a reviewer) publishes the same pinned candidate, drawing nothing.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re

import pytest
from typer.testing import CliRunner

from ehr_release import registry, service
from ehr_release.cli import app
from ehr_release.core.files import sha256_file
from ehr_release.dashboard.app import create_app
from ehr_release.governance.integrity import check_integrity
from ehr_release.release import bundle
from ehr_release.storage import runs
from ehr_release.storage.audit import export_events, verify_chain
from ehr_release.storage.engine import get_engine
from ehr_release.storage.runs import Status
from ehr_release.storage.users import add_user
from tests.flow_helpers import request_for, run_approved
from tests.test_dashboard import csrf_of, signed_in
from tests.test_storage import make_run, to_awaiting

#: What ``publish`` shows on stderr, one line per step as under ``approve``: the retry runs
#: the whole publishing flow and used to be silent until it ended (issue 34).
PUBLISH_STEPS = ["start the publishing flow (Prefect)", "read back the pinned candidate",
                 "check the approval and the pinned files",
                 "render the final certificate and datasheet",
                 "write, fsync and rename the release folder",
                 "file the certificate and record the publication"]
STEP_LINE = re.compile(r"^  ok (.+?) +\d+\.\d s \(total \d+\.\d s\)$")


def _shown_steps(stderr: str, run_id: str) -> list[str]:
    """The steps shown as done, after the command's title line (nothing else may follow)."""
    lines = stderr.splitlines()
    start = lines.index(f"publish {run_id}")
    shown = [STEP_LINE.match(line) for line in lines[start + 1:]]
    assert all(shown), lines[start + 1:]
    return [m.group(1) for m in shown if m]


def _events(run_id: str) -> list[dict]:
    return [json.loads(line) for line in export_events(run_id, "jsonl").splitlines()]


def _counting_draws(monkeypatch) -> list[int]:
    """Wrap the test algorithm's anonymizer so the test sees every draw."""
    draws: list[int] = []
    table = dict(registry._entries())
    entry = table["code-counts"]

    def counted(dataset, params, rng):
        draws.append(1)
        return entry.anonymize(dataset, params, rng)

    table["code-counts"] = dataclasses.replace(entry, anonymize=counted)
    monkeypatch.setattr(registry, "_entries", lambda: table)
    return draws


@pytest.mark.parametrize("retry", ["publish", "resume"])
def test_a_publish_that_failed_is_retried_from_the_pinned_candidate(env, any_db, monkeypatch,
                                                                    retry):
    from ehr_release.tasks import publish

    data, out = env
    draws = _counting_draws(monkeypatch)
    real_write = publish.write_durably
    full = {"on": True}

    def disk_full(path, content, **kwargs):
        if full["on"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_write(path, content, **kwargs)

    monkeypatch.setattr(publish, "write_durably", disk_full)
    get_engine()  # tables first: two threads creating them in a fresh PostgreSQL database race
    req = request_for(data, out)
    run_approved(req)
    run = runs.get_run(req.run_id)
    assert run.status == Status.APPROVED and runs.publication_failed(run)
    assert "No space left" in run.error
    failed = [e for e in _events(req.run_id) if e["action"] == "publish.failed"]
    assert len(failed) == 1 and "No space left" in failed[0]["payload"]["error"]
    assert "S00" not in json.dumps(failed)  # value-free: no patient id in the reason
    state = service.run_state(req.run_id)
    assert state.shown == "publication failed"
    assert f"ehr-release publish {req.run_id}" in (state.next_step or "")
    assert bundle.candidate_dir(req.run_id).is_dir()  # kept for the retry
    assert not (out / "releases" / req.run_id).exists()
    assert check_integrity()[0] == []

    full["on"] = False  # the cause is fixed
    if retry == "publish":  # the command a reviewer types, as the run's next step says
        done = CliRunner().invoke(app, ["publish", req.run_id])
        assert done.exit_code == 0, done.output
        assert done.stdout.strip().splitlines()[-1] == f"{req.run_id}: published"
        assert _shown_steps(done.stderr, req.run_id) == PUBLISH_STEPS, done.stderr
    else:
        assert service.resume_release(req.run_id, wait_timeout_s=60) == Status.PUBLISHED
    run = runs.get_run(req.run_id)
    assert run.status == Status.PUBLISHED and run.error is None
    assert draws == [1]  # one draw, at the request; none at the retry
    pinned = runs.pinned_candidate(req.run_id)
    folder = out / "releases" / req.run_id
    assert {n: (sha256_file(folder / n), (folder / n).stat().st_size) for n in pinned} == pinned
    actions = [e["action"] for e in _events(req.run_id)]
    assert actions.count("run.requested") == 1 and actions.count("run.published") == 1
    assert len(runs.list_runs()) == 1
    assert verify_chain().ok and check_integrity()[0] == []


def test_the_recorded_failure_keeps_the_run_approved_on_both_databases(db_url, tmp_path):
    """The storage half of the retry: the failure is a chained event, the status stays."""
    engine = get_engine(db_url)
    run = make_run(engine, requester="steward.sam")
    to_awaiting(run.id, engine)
    runs.decide(run.id, reviewer="rita", decision="approve", reason="ok", engine=engine)
    assert runs.record_publish_failure(run.id, actor="system:publish_flow",
                                       error="OSError: No space left on device",
                                       engine=engine)
    again = runs.get_run(run.id, engine)
    assert again.status == Status.APPROVED and runs.publication_failed(again)
    assert check_integrity(engine)[0] == []
    runs.transition(run.id, Status.PUBLISHED, actor="flow", engine=engine)
    assert not runs.record_publish_failure(run.id, actor="x", error="late", engine=engine)


@pytest.fixture
def failed_publication(ehr_home):
    engine = get_engine()
    run = make_run(engine, requester="steward.sam")
    to_awaiting(run.id, engine)
    creds = {name: add_user(name, role) for name, role in
             [("steward.sam", "steward"), ("rita", "reviewer")]}
    runs.decide(run.id, reviewer="rita", decision="approve", reason="ok")
    runs.record_publish_failure(run.id, actor="system:publish_flow",
                                error="OSError: No space left on device")
    tried: list[str] = []

    def publish(run_id: str) -> Status:
        tried.append(run_id)
        return Status(runs.get_run(run_id).status)

    return run.id, creds, tried, create_app(publish=publish)


def test_the_dashboard_offers_a_reviewer_the_retry(failed_publication) -> None:
    run_id, creds, tried, app = failed_publication
    client = signed_in(app, "rita", creds["rita"])
    page = client.get(f"/runs/{run_id}").text
    assert "publication failed" in page and 'id="retry-publish"' in page
    assert "No space left on device" in page
    token = csrf_of(client, f"/runs/{run_id}")
    assert client.post(f"/runs/{run_id}/publish", data={"csrf": "forged"}).status_code == 403
    assert tried == []
    done = client.post(f"/runs/{run_id}/publish", data={"csrf": token})
    assert done.status_code == 303 and tried == [run_id]


def test_a_steward_gets_no_retry(failed_publication) -> None:
    run_id, creds, tried, app = failed_publication
    client = signed_in(app, "steward.sam", creds["steward.sam"])
    assert 'id="retry-publish"' not in client.get(f"/runs/{run_id}").text
    token = csrf_of(client, "/")
    assert client.post(f"/runs/{run_id}/publish", data={"csrf": token}).status_code == 403
    assert tried == []
    assert "publish.refused" in export_events(run_id, "jsonl")


def test_a_reviewer_page_marks_own_requests_by_the_chain(ehr_home) -> None:
    """Item 1 in the dashboard: an edited requester column does not hide a reviewer's own
    request (no decision form, 403 on a forged post)."""
    from sqlalchemy import text
    from sqlmodel import Session

    engine = get_engine()
    creds = {"rita": add_user("rita", "reviewer")}
    own = make_run(engine, requester="rita")
    to_awaiting(own.id, engine)
    with Session(engine) as s:
        s.exec(text("UPDATE release_runs SET requester = 'someone' WHERE id = :r")
               .bindparams(r=own.id))
        s.commit()
    app = create_app(publish=lambda run_id: Status(runs.get_run(run_id).status))
    client = signed_in(app, "rita", creds["rita"])
    page = client.get(f"/runs/{own.id}").text
    assert 'action="/runs/' not in page and 'id="own-request"' in page
    token = csrf_of(client, "/")
    refused = client.post(f"/runs/{own.id}/decision",
                          data={"decision": "approve", "reason": "mine", "csrf": token})
    assert refused.status_code == 403
    assert runs.get_run(own.id).status == Status.AWAITING_APPROVAL
