"""Issue 15 item 5: once users exist, command-line decisions need the user's credential and
role, as in the dashboard; a site without users keeps single-user behaviour.

Rejections are used to exercise ``approve`` (they need no Prefect server); the identity check
runs before the decision either way.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.governance.identity import same_person
from ehr_release.storage import runs
from ehr_release.storage.audit import export_events
from ehr_release.storage.engine import get_engine
from ehr_release.storage.runs import Status
from ehr_release.storage.users import add_user
from tests.test_storage import make_run, to_awaiting


def _awaiting() -> str:
    engine = get_engine()
    run = make_run(engine, requester="steward.sam")
    to_awaiting(run.id, engine)
    return run.id


def _reject(run_id: str, reviewer: str, env: dict[str, str] | None = None,
            stdin: str | None = None):
    return CliRunner().invoke(app, ["approve", run_id, "--reviewer", reviewer, "--decision",
                                    "reject", "--reason", "too coarse"], env=env, input=stdin)


def _decision_payload(run_id: str) -> dict:
    events = [json.loads(x) for x in export_events(run_id, "jsonl").splitlines()]
    return next(e["payload"] for e in events if e["action"] == "run.rejected")


def test_single_user_site_takes_the_name_and_says_so(any_db) -> None:
    run_id = _awaiting()
    done = _reject(run_id, "anyone")
    assert done.exit_code == 0, done.output
    payload = _decision_payload(run_id)
    assert payload["channel"].startswith("cli (single-user site") and payload["role"] is None


def test_with_users_a_decision_needs_the_reviewers_credential(any_db, monkeypatch) -> None:
    monkeypatch.delenv("EHR_RELEASE_CREDENTIAL", raising=False)
    rita = add_user("rita", "reviewer")
    sam = add_user("steward.sam", "steward")
    run_id = _awaiting()

    assert _reject(run_id, "mallory", env={"EHR_RELEASE_CREDENTIAL": "guess"}).exit_code == 1
    assert _reject(run_id, "rita", env={"EHR_RELEASE_CREDENTIAL": "guess"}).exit_code == 1
    wrong_role = _reject(run_id, "steward.sam", env={"EHR_RELEASE_CREDENTIAL": sam})
    assert wrong_role.exit_code == 1 and "needs a reviewer" in wrong_role.output
    no_input = _reject(run_id, "rita", stdin="")  # no credential and no terminal
    assert no_input.exit_code == 1
    assert "set EHR_RELEASE_CREDENTIAL to rita's credential" in no_input.output
    assert runs.get_run(run_id).status == Status.AWAITING_APPROVAL

    trail = export_events(None, "jsonl")
    assert trail.count('"action":"auth.refused"') >= 3
    assert rita not in trail and sam not in trail  # credentials never reach the trail

    monkeypatch.setattr("ehr_release.governance.identity.has_terminal", lambda: True)
    typed = _reject(run_id, "rita", stdin=f"{rita}\n")  # the prompt, hidden input
    assert typed.exit_code == 0, typed.output
    assert runs.get_run(run_id).status == Status.REJECTED
    payload = _decision_payload(run_id)
    assert payload["channel"] == "cli" and payload["role"] == "reviewer"


def test_with_users_a_request_needs_a_stewards_credential(any_db, tmp_path) -> None:
    add_user("rita", "reviewer")
    data = tmp_path / "x.csv"
    data.write_text("patient_id,codes\nA,401.9\n")
    done = CliRunner().invoke(app, ["run", "--input", str(data), "--algorithm",
                                    "disassociation", "--param", "k=2", "--requester",
                                    "nobody", "--out", str(tmp_path / "out")],
                              env={"EHR_RELEASE_CREDENTIAL": "guess"})
    assert done.exit_code == 1 and "unknown user or wrong credential" in done.output
    assert runs.list_runs() == []


def test_one_four_eyes_rule() -> None:
    assert same_person("Sam ", "sam") and not same_person("sam", "rita")


def test_without_a_terminal_a_credential_is_asked_for_by_its_variable(any_db, tmp_path,
                                                                      monkeypatch) -> None:
    """Issue 34: after ``users add``, examples/demo/run.sh printed getpass's GetPassWarning
    and ``error: `` with an empty message (a hidden prompt on a pipe, then click's Abort).
    Without a terminal, a command that needs a credential says which variable to set, in
    one line, and prompts for nothing."""
    import subprocess
    import sys

    for name in ("EHR_RELEASE_CREDENTIAL", "EHR_RELEASE_REVIEWER_CREDENTIAL"):
        monkeypatch.delenv(name, raising=False)
    sam = add_user("steward.sam", "steward")
    add_user("rita", "reviewer")
    data = tmp_path / "x.csv"
    data.write_text("patient_id,codes\nA,401.9\nB,401.9\n")
    base = [sys.executable, "-m", "ehr_release.cli"]
    run = [*base, "run", "--input", str(data), "--algorithm", "disassociation",
           "--param", "k=2", "--param", "m=1", "--requester", "steward.sam",
           "--out", str(tmp_path / "out")]
    cases = [(run, "EHR_RELEASE_CREDENTIAL", {}),
             ([*run, "--approve-as", "rita", "--reason", "fine"],
              "EHR_RELEASE_REVIEWER_CREDENTIAL", {"EHR_RELEASE_CREDENTIAL": sam}),
             ([*base, "approve", _awaiting(), "--reviewer", "rita", "--decision", "reject",
               "--reason", "too coarse"], "EHR_RELEASE_CREDENTIAL", {})]
    import os

    for argv, variable, extra in cases:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              env={**os.environ, **extra}, timeout=120)
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert done.returncode == 1, done.stderr
        assert "GetPassWarning" not in done.stderr and "credential of" not in done.stderr
        assert len(lines) == 1 and lines[0].startswith("error: ") and variable in lines[0], lines
    assert runs.list_runs()[0].status == Status.AWAITING_APPROVAL
