"""``release_flow`` end to end under Prefect's test harness, with the code-counts double."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from ehr_release.core.errors import ApprovalError, InputError
from ehr_release.storage import runs
from ehr_release.storage.audit import export_events, verify_chain
from ehr_release.storage.runs import Status
from tests import doubles
from tests.flow_helpers import (
    CSV,
    copies_of,
    decide,
    request_for,
    run_approved,
    start,
    wait_status,
)


def test_published_manifest_holds_no_test_seed(env):
    """The datasheet leaves the seed out (anyone who knows it replays the randomness); the
    manifest beside it in the published folder must too."""
    data, out = env
    req = request_for(data, out).model_copy(update={"params": {"k": "3", "seed": "7"}})
    run_approved(req)
    manifest = json.loads((out / "releases" / req.run_id / "manifest.json").read_text())
    assert manifest["parameters"] == {"k": "3"}
    assert json.loads(runs.get_run(req.run_id).parameters_json)["seed"] == "7"  # recorded inside


def test_published_parameters_name_site_files_by_file_name_only(env):
    """A parameter naming a file on the site's machine (a configuration, a population) is
    published by its file name: the folders it sits in (a cohort's folder, a user's home)
    are the site's, not the release's."""
    data, out = env
    site_file = "/home/steward/oncology-cohort-2026/notes.yaml"
    req = request_for(data, out).model_copy(update={"params": {"k": "3", "notes": site_file}})
    run_approved(req)
    manifest = json.loads((out / "releases" / req.run_id / "manifest.json").read_text())
    assert manifest["parameters"] == {"k": "3", "notes": "notes.yaml"}
    assert json.loads(runs.get_run(req.run_id).parameters_json)["notes"] == site_file


def test_approve_path_publishes_once_with_manifest(env):
    data, out = env
    req = request_for(data, out)
    thread, box = start(req)
    assert wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL
    assert not (out / "releases" / req.run_id).exists()
    decide(req.run_id, "approve")
    thread.join(120)
    assert box.get("result") == "published", box
    folder = out / "releases" / req.run_id
    assert sorted(p.name for p in folder.iterdir()) == ["counts.json", "datasheet.pdf",
                                                        "manifest.json"]
    counts = json.loads((folder / "counts.json").read_text())
    assert counts == {"250.00": 12, "272.0": 8, "401.9": 12}  # 296.01 (1 patient) withheld
    manifest = json.loads((folder / "manifest.json").read_text())
    import hashlib

    for entry in manifest["files"]:
        assert hashlib.sha256((folder / entry["name"]).read_bytes()).hexdigest() == \
            entry["sha256"]
    assert (folder / "datasheet.pdf").read_bytes().startswith(b"%PDF")
    # The internal certificate is filed in the home, recorded, and never published.
    filed = [a for a in runs.list_artifacts(req.run_id) if a.kind == "certificate"]
    assert len(filed) == 1 and Path(filed[0].path).read_bytes().startswith(b"%PDF")
    assert not Path(filed[0].path).is_relative_to(out)
    events = [json.loads(line) for line in export_events(req.run_id, "jsonl").splitlines()]
    actions = [e["action"] for e in events]
    for stage in ("run.requested", "run.anonymized", "run.verified", "run.evaluated",
                  "run.certified", "run.awaiting_approval", "run.approved", "run.published"):
        assert actions.count(stage) == 1, stage
    published = next(e for e in events if e["action"] == "run.published")
    uuid.UUID(published["payload"]["flow_run_id"])  # the dashboard links the publish flow run
    assert verify_chain().ok
    assert not list((out / "releases").glob(".staging-*"))

    # Tampering with a published file is caught by `audit verify`, naming the file.
    from typer.testing import CliRunner

    from ehr_release.cli import app

    assert CliRunner().invoke(app, ["audit", "verify"]).exit_code == 0
    (folder / "counts.json").write_text('{"250.00": 12}')
    tampered = CliRunner().invoke(app, ["audit", "verify"])
    assert tampered.exit_code == 1
    assert "counts.json" in tampered.output


def test_reject_path_publishes_nothing(env):
    data, out = env
    req = request_for(data, out)
    thread, box = start(req)
    wait_status(req.run_id, {Status.AWAITING_APPROVAL})
    decide(req.run_id, "reject")
    thread.join(120)
    assert box.get("result") == "rejected"
    assert not (out / "releases" / req.run_id).exists()
    assert runs.get_approval(req.run_id).decision == "reject"
    # Trying to publish it anyway is refused, and the try is on the trail.
    from ehr_release import service
    from ehr_release.core.errors import EhrReleaseError

    with pytest.raises(EhrReleaseError, match="only an approved run is published"):
        service.publish(req.run_id)
    assert not (out / "releases" / req.run_id).exists()
    assert "publish.refused" in export_events(req.run_id, "csv")
    assert verify_chain().ok


def test_failed_verification_never_reaches_approval(env):
    data, out = env
    req = request_for(data, out, algorithm="leaky-code-counts")
    thread, box = start(req)
    thread.join(120)
    assert "verification failed" in str(box.get("error"))
    run = runs.get_run(req.run_id)
    assert run.status == Status.FAILED and "count threshold" in run.error
    assert not (out / "releases").exists()
    assert runs.latest_verification(req.run_id)["holds"] is False

    # No entry point publishes it: not a decision, not the CLI, not resume, not publish.
    from typer.testing import CliRunner

    from ehr_release.cli import app
    from ehr_release.core.errors import EhrReleaseError
    from ehr_release.tasks.publish import publish_release

    with pytest.raises(EhrReleaseError):
        runs.decide(req.run_id, reviewer="reviewer", decision="approve", reason="override")
    cli = CliRunner()
    approve = cli.invoke(app, ["approve", req.run_id, "--reviewer", "reviewer", "--decision",
                               "approve", "--reason", "override"])
    assert approve.exit_code == 1 and "not awaiting approval" in approve.output
    assert cli.invoke(app, ["resume", req.run_id]).exit_code == 1
    from ehr_release.model.reports import Requirement, UtilityReport, VerificationReport

    forged = VerificationReport("leaky-code-counts", [Requirement("x", "x", "x", True)])
    with pytest.raises(EhrReleaseError, match="only an approved run"):
        publish_release(req.run_id, {"counts.json": b"{}"}, forged,
                        UtilityReport("leaky-code-counts", {}), "reviewer")
    assert not (out / "releases").exists()
    assert runs.get_run(req.run_id).status == Status.FAILED


def test_bad_input_leaves_only_an_audit_event(env, tmp_path):
    data, out = env
    bad = tmp_path / "bad.csv"
    bad.write_text("patient_id,codes\nA,401.9\nA,250\n")
    req = request_for(bad, out)
    thread, box = start(req)
    thread.join(120)
    assert isinstance(box.get("error"), InputError)
    assert runs.list_runs() == []
    events = [e for e in map(json.loads, export_events(None, "jsonl").splitlines())
              if e["action"] not in {"site.created", "site.setting_set"}]  # the fixture's
    # test site and the site's settings, recorded on first use
    assert [e["action"] for e in events] == ["ingest.rejected"]
    assert "duplicate patient id (same as row 1)" in events[0]["payload"]["error"]
    assert "'A'" not in events[0]["payload"]["error"]


def test_no_decision_before_timeout_means_rejected(env):
    """The window is data, not a waiting process: once it closes, the next look rejects."""
    import time

    from ehr_release.core.errors import ApprovalError
    from ehr_release.service import decide as record

    data, out = env
    req = request_for(data, out, timeout=3)
    thread, box = start(req)
    assert wait_status(req.run_id, {Status.AWAITING_APPROVAL}) == Status.AWAITING_APPROVAL
    assert wait_flow_ended(box) == Status.AWAITING_APPROVAL  # no process waits
    time.sleep(3.5)
    with pytest.raises(ApprovalError, match="not awaiting approval"):
        record(req.run_id, reviewer="reviewer", decision="approve", reason="too late")
    thread.join(120)
    assert box.get("result") == "rejected"
    events = [json.loads(x) for x in export_events(req.run_id, "jsonl").splitlines()]
    assert [e["actor"] for e in events if e["action"] == "run.rejected"] == \
        ["system:approval-timeout"]
    assert runs.get_approval(req.run_id) is None
    assert not (out / "releases").exists()


def wait_flow_ended(box: dict, timeout: float = 60) -> str:
    import time

    deadline = time.monotonic() + timeout
    while "flow" not in box and "error" not in box and time.monotonic() < deadline:
        time.sleep(0.2)
    return box.get("flow", box.get("error"))


class SimulatedCrash(BaseException):
    """Stands for the flow process dying (not an error the flow can handle)."""


def test_resumed_run_reuses_its_release_and_publishes_once(env, monkeypatch):
    """A flow that died before its run was parked shows as stalled and is restarted with the
    same request: the anonymization comes from the cache (same bytes, pinned), the run is
    parked for the reviewer, and the approved release is published exactly once."""
    from ehr_release.flows import release
    from ehr_release.service import run_state

    data, out = env
    req = request_for(data, out)

    def crash(*_args, **_kwargs):
        raise SimulatedCrash

    with monkeypatch.context() as patch:
        patch.setattr(release, "park_task", crash)
        first, box1 = start(req)
        first.join(120)
    assert isinstance(box1.get("error"), SimulatedCrash)
    assert runs.get_run(req.run_id).status == Status.CERTIFIED
    state = run_state(req.run_id)
    assert state.shown == "stalled" and f"ehr-release resume {req.run_id}" in state.next_step
    pinned = runs.pinned_candidate(req.run_id)
    second, box = start(req)
    assert wait_status(req.run_id, {Status.AWAITING_APPROVAL}) == Status.AWAITING_APPROVAL
    assert run_state(req.run_id).shown == "awaiting_approval"
    decide(req.run_id, "approve")
    second.join(120)
    assert box.get("result") == "published", box
    assert runs.pinned_candidate(req.run_id) == pinned
    events = export_events(req.run_id, "jsonl")
    assert events.count('"action":"run.published"') == 1
    assert events.count('"action":"run.resumed"') == 1
    third, box3 = start(req)
    third.join(120)
    assert "cannot be resumed" in str(box3.get("error"))
    assert len(list((out / "releases").iterdir())) == 1


MARKER = "MRNLEAK4242"


def test_patient_identifiers_never_leave_the_input(env, ehr_home, tmp_path):
    """Plant marker ids; grep every produced file, the database, artifacts and logs."""
    import os

    from prefect import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        TaskRunFilter,
    )
    from prefect.client.schemas.sorting import ArtifactSort, FlowRunSort, LogSort

    _, out = env
    data = tmp_path / "marked.csv"
    data.write_text(CSV.replace("S0", MARKER))
    assert MARKER in data.read_text()
    req = request_for(data, out)
    box = run_approved(req)
    assert box.get("result") == "published", box

    assert copies_of(MARKER, [ehr_home, out, Path(os.environ["PREFECT_HOME"])]) == []
    flow_run_id = runs.get_run(req.run_id).flow_run_id
    with get_client(sync_client=True) as client:
        # Explicit filters, sort and offset: Prefect 3.8.8's defaults get HTTP 422.
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(), flow_run_filter=FlowRunFilter(),
            task_run_filter=TaskRunFilter(), sort=ArtifactSort.CREATED_DESC, limit=200, offset=0)
        logs = client.read_logs(log_filter=LogFilter(), limit=200, offset=0,
                                sort=LogSort.TIMESTAMP_ASC)
        run = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            sort=FlowRunSort.START_TIME_DESC, limit=1, offset=0)[0]
    assert artifacts and logs
    texts = [str(a.data) + str(a.description) for a in artifacts] + [lg.message for lg in logs]
    texts.append(run.model_dump_json())
    assert not [t for t in texts if MARKER in t]


def test_release_file_names_cannot_escape_the_release_folder(env, monkeypatch):
    import dataclasses

    from ehr_release import registry

    _, out = env
    escaping = dataclasses.replace(
        doubles.CODE_COUNTS, name="escaping",
        anonymize=lambda ds, params, rng: {"../../escape.json": b"{}"})
    table = dict(registry._entries())
    table["escaping"] = escaping
    monkeypatch.setattr(registry, "_entries", lambda: table)
    req = request_for(env[0], out, algorithm="escaping")
    thread, box = start(req)
    thread.join(120)
    run = runs.get_run(req.run_id)
    assert run.status == Status.FAILED
    assert "unsafe release file name" in run.error
    assert not (out / "releases").exists()
    assert not list(out.parent.rglob("escape.json"))


@pytest.mark.parametrize("fault, message", [
    ("ENOSPC", "No space left"),
    ("EROFS", "Read-only file system"),  # the tests run as root: chmod would not stop us
])
def test_disk_full_at_publish_leaves_no_partial_release(env, monkeypatch, fault, message):
    import errno
    import os

    from ehr_release.tasks import publish

    data, out = env
    real_write = publish.write_durably
    written: list[str] = []

    def fill_up(path, content, **kwargs):
        if written:
            code = getattr(errno, fault)
            raise OSError(code, os.strerror(code), str(path))
        written.append(str(path))
        real_write(path, content, **kwargs)

    monkeypatch.setattr(publish, "write_durably", fill_up)
    req = request_for(data, out)
    run_approved(req)
    run = runs.get_run(req.run_id)
    assert written, "the fault was never injected"
    # issue 33 item 7: the approval stands; the run waits for a retry (below), not failed
    assert run.status == Status.APPROVED and runs.publication_failed(run)
    assert message in run.error
    assert not (out / "releases" / req.run_id).exists()
    assert not list((out / "releases").glob(".staging-*"))
    assert verify_chain().ok


def test_transient_error_is_retried_and_each_attempt_audited(env, monkeypatch):
    from ehr_release.tasks import certify

    data, out = env
    real_render = certify.render_certificate_pdf
    calls: list[int] = []

    def flaky(ctx):
        calls.append(1)
        if len(calls) == 1:
            raise OSError("transient: disk busy")
        return real_render(ctx)

    monkeypatch.setattr(certify, "render_certificate_pdf", flaky)
    req = request_for(data, out)
    thread, box = start(req)
    assert wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL
    decide(req.run_id, "reject")
    thread.join(120)
    events = [json.loads(line) for line in export_events(req.run_id, "jsonl").splitlines()]
    retries = [e for e in events if e["action"] == "task.retrying"]
    assert len(calls) == 2
    assert len(retries) == 1
    assert retries[0]["payload"]["task"] == "certify"
    assert "disk busy" in retries[0]["payload"]["error"]


def test_a_releases_folder_swapped_for_a_symlink_is_refused_at_publish(env, monkeypatch,
                                                                       tmp_path):
    """The destination is checked again right before publishing; the ``releases`` folder
    the release lands in under it must be checked too: a symlink put there between the
    request and the approval led the patient data outside the releases root."""
    data, out = env
    monkeypatch.setenv("EHR_RELEASE_RELEASES_ROOT", str(tmp_path))
    outside = tmp_path.parent / f"outside-{uuid.uuid4().hex}"
    outside.mkdir()
    req = request_for(data, out)
    thread, box = start(req)
    assert wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL
    out.mkdir(parents=True, exist_ok=True)
    (out / "releases").symlink_to(outside, target_is_directory=True)
    # Seen before the decision (issue 34): refused in one line, the run still awaiting.
    with pytest.raises(ApprovalError, match="releases folder resolves to"):
        decide(req.run_id, "approve")
    assert runs.get_run(req.run_id).status == Status.AWAITING_APPROVAL
    # Swapped between the decision and publishing: the publisher's own check refuses it.
    monkeypatch.setattr("ehr_release.storage.destinations.destination_problem", lambda _: None)
    decide(req.run_id, "approve")
    thread.join(120)
    assert list(outside.iterdir()) == []
    assert runs.get_run(req.run_id).status == Status.APPROVED  # retryable once fixed
    assert "releases" in runs.get_run(req.run_id).error


def test_a_destination_blocked_after_the_request_fails_publishing_in_one_line(env, capfd,
                                                                             monkeypatch):
    """A file put where ``<out>/releases`` goes: before the decision, the approval is refused
    in one line (issue 34); put there after it, the run fails with the destination's
    one-line reason, nothing lands, and the approving terminal gets no Prefect traceback
    (the CLI prints the run's error itself)."""
    data, out = env
    out.mkdir(parents=True, exist_ok=True)
    req = request_for(data, out)
    thread, box = start(req)
    assert wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL
    (out / "releases").write_text("in the way")
    with pytest.raises(ApprovalError, match="its releases entry is not a folder"):
        decide(req.run_id, "approve")
    assert runs.get_run(req.run_id).status == Status.AWAITING_APPROVAL
    monkeypatch.setattr("ehr_release.storage.destinations.destination_problem", lambda _: None)
    capfd.readouterr()
    decide(req.run_id, "approve")
    thread.join(120)
    run = runs.get_run(req.run_id)
    assert run.status == Status.APPROVED and runs.publication_failed(run)
    assert run.error == (f"DestinationError: release destination {out.resolve()}: its releases "
                         "entry is not a folder")
    assert (out / "releases").read_text() == "in the way"
    assert "Traceback" not in capfd.readouterr().err
