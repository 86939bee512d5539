"""Issue 34, finding 1: site settings a decision depends on are the site's, stored once.

Found: the README's "Using it" block exported EHR_RELEASE_RELEASES_ROOT and its dashboard
block did not. A run requested with ``--out out/`` and approved on the dashboard ended "The
run is now failed. DestinationError: … outside the releases root"; ``publish`` then refused
("only an approved run is published") and the review was lost. The page had shown
"Publishes to …/out/releases/…" with no warning.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ehr_release.core.errors import ApprovalError, ConfigError
from ehr_release.planning.request import require_data_use
from ehr_release.storage import runs
from ehr_release.storage.actions import Decision
from ehr_release.storage.audit import export_events
from ehr_release.storage.destinations import check_still_there, releases_root, resolve_destination
from ehr_release.storage.runs import Status
from ehr_release.storage.site_settings import SettingConflict, change
from tests.test_storage import PATH_TO_AWAITING

ROOT_ENV = "EHR_RELEASE_RELEASES_ROOT"


def _awaiting_at(out_dir: str) -> str:
    from ehr_release.storage.models import DatasetRecord

    ds = DatasetRecord(fingerprint="cd" * 32, rows=10, codes=30, columns_json="{}", source="x")
    run = runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester="steward.sam",
                          algorithm="code-counts", parameters={"k": "2"}, out_dir=out_dir)
    for status in PATH_TO_AWAITING:
        runs.transition(run.id, status, actor="flow")
    return run.id


def test_the_root_a_request_was_checked_against_is_the_one_every_process_uses(
        ehr_home, tmp_path, monkeypatch) -> None:
    """The steward's shell sets the variable; the dashboard's process (no variable) checks
    the same root: the request-time check and the publisher's agree."""
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "out"))
    recorded = str(resolve_destination(tmp_path / "out" / "study12"))  # the request
    monkeypatch.delenv(ROOT_ENV)  # the dashboard's process
    assert releases_root() == (tmp_path / "out").resolve()
    assert check_still_there(recorded) == (tmp_path / "out" / "study12").resolve()
    events = [json.loads(x) for x in export_events(None, "jsonl").splitlines()]
    first = next(e for e in events if e["action"] == "site.setting_set"
                 and e["payload"]["setting"] == "releases_root")
    assert first["actor"] == "system:first-use"
    assert first["payload"]["reason"] == f"initialised from {ROOT_ENV}"


def test_a_process_whose_variable_disagrees_is_refused_in_one_line(ehr_home, tmp_path,
                                                                   monkeypatch) -> None:
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "a"))
    releases_root()
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "b"))
    with pytest.raises(SettingConflict) as refused:
        releases_root()
    line = str(refused.value)
    assert "\n" not in line and "ehr-release policy releases-root" in line
    assert str(tmp_path / "a") in line
    change("releases_root", str(tmp_path / "b"), actor="admin.alex", reason="new share")
    assert releases_root() == (tmp_path / "b").resolve()  # the variable now agrees


def test_policy_commands_show_and_change_the_settings_audited(ehr_home, tmp_path,
                                                              monkeypatch) -> None:
    from ehr_release.cli import app

    monkeypatch.delenv(ROOT_ENV, raising=False)
    monkeypatch.delenv("EHR_RELEASE_REQUIRE_DATA_USE", raising=False)
    cli = CliRunner()
    shown = cli.invoke(app, ["policy", "releases-root"])
    assert shown.exit_code == 0 and shown.output.strip() == str(ehr_home / "releases")
    refused = cli.invoke(app, ["policy", "releases-root", str(tmp_path / "x")])
    assert refused.exit_code != 0 and "--by NAME and --reason" in refused.output
    done = cli.invoke(app, ["policy", "releases-root", str(tmp_path / "x"), "--by",
                            "admin.alex", "--reason", "the study share"])
    assert done.exit_code == 0, done.output
    assert releases_root() == (tmp_path / "x").resolve()
    assert not require_data_use()
    assert cli.invoke(app, ["policy", "data-use", "on", "--by", "admin.alex", "--reason",
                            "IRB"]).exit_code == 0
    monkeypatch.setenv("EHR_RELEASE_REQUIRE_DATA_USE", "1")  # agrees: no conflict
    assert require_data_use()
    monkeypatch.delenv("EHR_RELEASE_REQUIRE_DATA_USE")  # another process: still on
    assert require_data_use()
    policy = cli.invoke(app, ["policy", "show"]).output
    assert "releases-root: " + str((tmp_path / "x").resolve()) in policy
    assert "data-use: on" in policy and "admin.alex" in policy
    trail = export_events(None, "jsonl")
    assert '"reason":"the study share"' in trail and '"reason":"IRB"' in trail


def test_an_approval_that_cannot_publish_is_refused_not_recorded(ehr_home, tmp_path,
                                                                 monkeypatch) -> None:
    """Check the destination before recording the approval: refused in one line, the run
    still awaits a decision (a reject is still possible), nothing is failed."""
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "out"))
    recorded = str(resolve_destination(tmp_path / "out" / "study12"))
    run_id = _awaiting_at(recorded)
    change("releases_root", str(tmp_path / "elsewhere"), actor="admin.alex",
           reason="moved the share")
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "elsewhere"))
    with pytest.raises(ApprovalError) as refused:
        runs.decide(run_id, reviewer="rita", decision=Decision.APPROVE, reason="fine")
    assert "outside the releases root" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert runs.get_run(run_id).status == Status.AWAITING_APPROVAL
    assert runs.get_approval(run_id) is None
    runs.decide(run_id, reviewer="rita", decision=Decision.REJECT, reason="cannot land")
    assert runs.get_run(run_id).status == Status.REJECTED


def test_the_dashboard_warns_before_the_click(ehr_home, tmp_path, monkeypatch) -> None:
    from ehr_release.dashboard.runview import _destination_problem

    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "out"))
    recorded = str(resolve_destination(tmp_path / "out" / "s"))
    run_id = _awaiting_at(recorded)
    run = runs.get_run(run_id)
    assert _destination_problem(run) is None
    change("releases_root", str(tmp_path / "other"), actor="admin.alex", reason="moved")
    monkeypatch.delenv(ROOT_ENV)
    assert "outside the releases root" in (_destination_problem(run) or "")


def test_a_request_without_a_window_gets_the_sites_when_parked(ehr_home) -> None:
    """The approval window is the site's too: a request that names none (the CLI without
    --approval-timeout, a deployment) is parked with the site's window, read then."""
    from datetime import datetime

    from ehr_release.planning.request import ReleaseRequest
    from ehr_release.storage import pending
    from ehr_release.storage.engine import get_engine
    from tests.test_durable_approval import _park
    from tests.test_storage import make_run

    assert ReleaseRequest(run_id="rel-" + "1" * 32, input_path="x.csv",
                          algorithm="disassociation", requester="s",
                          out_dir="/tmp").approval_timeout_s is None
    change("approval_window", "3600", actor="admin.alex", reason="one-hour reviews")
    run = make_run(get_engine())
    _park(run.id, None)
    closes = datetime.fromisoformat(pending.get_pending(run.id).expires_at)
    expected = datetime.fromisoformat(pending.expiry(3600))
    assert abs((closes - expected).total_seconds()) < 60
    with pytest.raises(ConfigError, match="whole number of seconds"):
        change("approval_window", "soon", actor="admin.alex", reason="x")


def test_the_finding_on_the_dashboard_no_lost_review(ehr_home, tmp_path, monkeypatch) -> None:
    """The finding end to end on the dashboard: the steward's shell had the variable, the
    dashboard's has none. The root is the site's, so the page raises no alarm and the
    approval is recorded; when the destination truly cannot take the release (the site's
    root moved), the page says so before the click and the approval is refused with the run
    still awaiting a decision — never recorded and then failed."""
    from ehr_release.dashboard.app import create_app
    from ehr_release.storage.users import add_user
    from tests.test_dashboard import csrf_of, signed_in, text_of

    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "out"))
    first = _awaiting_at(str(resolve_destination(tmp_path / "out" / "study12")))
    second = _awaiting_at(str(resolve_destination(tmp_path / "out" / "study13")))
    monkeypatch.delenv(ROOT_ENV)  # the dashboard's process
    rita = add_user("rita", "reviewer")
    published: list[str] = []

    def publish(run_id: str) -> Status:
        published.append(run_id)
        return Status(runs.get_run(run_id).status)

    client = signed_in(create_app(publish=publish), "rita", rita)
    assert 'id="destination-problem"' not in client.get(f"/runs/{first}").text
    done = client.post(f"/runs/{first}/decision", data={
        "decision": "approve", "reason": "fine", "csrf": csrf_of(client, f"/runs/{first}")})
    assert done.status_code == 303 and published == [first]

    change("releases_root", str(tmp_path / "elsewhere"), actor="admin.alex", reason="moved")
    page = client.get(f"/runs/{second}").text
    assert "outside the releases root" in text_of(page, "destination-problem")
    refused = client.post(f"/runs/{second}/decision", data={
        "decision": "approve", "reason": "fine", "csrf": csrf_of(client, f"/runs/{second}")})
    assert refused.status_code == 409 and "Refused: approving would not publish" in refused.text
    assert runs.get_run(second).status == Status.AWAITING_APPROVAL
    assert published == [first]
