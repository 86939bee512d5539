"""The reviewer dashboard in process (TestClient): sign-in, roles, CSRF, escaping, decisions."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from ehr_release.dashboard.app import COOKIE, create_app
from ehr_release.storage import runs
from ehr_release.storage.audit import export_events, verify_chain
from ehr_release.storage.engine import get_engine
from ehr_release.storage.runs import Status
from ehr_release.storage.users import add_user
from tests.test_storage import make_run, to_awaiting


@pytest.fixture
def world(ehr_home):
    engine = get_engine()
    run = make_run(engine, requester="steward.sam")
    to_awaiting(run.id, engine)
    creds = {name: add_user(name, role) for name, role in
             [("steward.sam", "steward"), ("rita", "reviewer"), ("audrey", "auditor")]}
    resumed: list[str] = []  # runs whose publishing flow the decision started

    def publish(run_id: str) -> Status:
        resumed.append(run_id)
        return Status(runs.get_run(run_id).status)

    app = create_app(publish=publish)
    return run.id, creds, resumed, app


def signed_in(app, name: str, credential: str) -> TestClient:
    client = TestClient(app, follow_redirects=False)
    response = client.post("/login", data={"name": name, "credential": credential})
    assert response.status_code == 303 and COOKIE in response.cookies
    return client


def csrf_of(client: TestClient, path: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', client.get(path).text).group(1)


def test_pages_need_a_session(world) -> None:
    _, _, _, app = world
    client = TestClient(app, follow_redirects=False)
    for path in ("/", "/audit", f"/runs/{world[0]}"):
        assert client.get(path).headers["location"] == "/login"


def test_wrong_credential_is_refused_and_audited(world) -> None:
    _, creds, _, app = world
    client = TestClient(app)
    page = client.post("/login", data={"name": "rita", "credential": "guess"})
    assert "unknown user or wrong credential" in page.text
    assert COOKIE not in client.cookies
    assert '"auth.refused"' in export_events(None, "jsonl") or \
        "auth.refused" in export_events(None, "jsonl")


def test_reviewer_approves_with_reason_and_csrf(world) -> None:
    run_id, creds, resumed, app = world
    client = signed_in(app, "rita", creds["rita"])
    assert run_id in client.get("/").text
    token = csrf_of(client, f"/runs/{run_id}")
    missing = client.post(f"/runs/{run_id}/decision",
                          data={"decision": "approve", "reason": "ok", "csrf": "forged"})
    assert missing.status_code == 403
    assert runs.get_approval(run_id) is None
    done = client.post(f"/runs/{run_id}/decision",
                       data={"decision": "approve", "reason": "checked k^m", "csrf": token})
    assert done.status_code == 303
    assert runs.get_run(run_id).status == Status.APPROVED
    assert runs.get_approval(run_id).reviewer == "rita"
    assert resumed == [run_id]
    assert verify_chain().ok


def test_steward_may_not_decide(world) -> None:
    run_id, creds, resumed, app = world
    client = signed_in(app, "steward.sam", creds["steward.sam"])
    page = client.get(f"/runs/{run_id}").text
    assert 'action="/runs/' not in page  # no decision form for a steward
    token = csrf_of(client, "/")
    refused = client.post(f"/runs/{run_id}/decision",
                          data={"decision": "approve", "reason": "mine", "csrf": token})
    assert refused.status_code == 403
    assert runs.get_run(run_id).status == Status.AWAITING_APPROVAL and resumed == []
    assert "approval.refused" in export_events(run_id, "jsonl")


def test_reviewer_who_requested_may_not_decide(world) -> None:
    _, creds, resumed, app = world
    engine = get_engine()
    own = make_run(engine, requester="rita")
    to_awaiting(own.id, engine)
    client = signed_in(app, "rita", creds["rita"])
    token = csrf_of(client, "/")
    response = client.post(f"/runs/{own.id}/decision",
                           data={"decision": "approve", "reason": "mine", "csrf": token})
    assert "requested" in response.headers["location"]
    assert runs.get_run(own.id).status == Status.AWAITING_APPROVAL and resumed == []


def test_everything_rendered_is_escaped(world) -> None:
    run_id, creds, _, app = world
    runs.save_verification(run_id, {"algorithm": "x", "holds": True, "requirements": [
        {"name": "<script>alert(1)</script>", "required": "r", "measured": "m",
         "passed": True, "evidence": {}}]})
    client = signed_in(app, "rita", creds["rita"])
    page = client.get(f"/runs/{run_id}").text
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;" in page
    assert "frame-ancestors 'none'" in client.get("/").headers["content-security-policy"]


def test_auditor_reads_the_audit_trail_but_may_not_decide(world) -> None:
    run_id, creds, _, app = world
    client = signed_in(app, "audrey", creds["audrey"])
    page = client.get("/audit")
    assert page.status_code == 200 and "audit chain" in page.text
    token = csrf_of(client, "/")
    assert client.post(f"/runs/{run_id}/decision", data={
        "decision": "reject", "reason": "x", "csrf": token}).status_code == 403


def test_unknown_run_is_404_and_traversal_is_refused(world) -> None:
    _, creds, _, app = world
    client = signed_in(app, "rita", creds["rita"])
    assert client.get("/runs/rel-" + "0" * 32).status_code == 404
    assert client.get("/runs/..%2F..%2Fetc%2Fpasswd/certificate.pdf").status_code == 404


def test_sign_out_ends_the_session(world) -> None:
    _, creds, _, app = world
    client = signed_in(app, "rita", creds["rita"])
    token = csrf_of(client, "/")
    assert client.post("/logout", data={"csrf": token}).status_code == 303
    client.cookies.clear()
    assert client.get("/").status_code == 303


def test_a_failed_verification_cannot_be_approved_from_the_dashboard(world) -> None:
    run_id, creds, resumed, app = world
    engine = get_engine()
    failed = make_run(engine, requester="steward.sam")
    runs.transition(failed.id, Status.ANONYMIZED, actor="flow", engine=engine)
    runs.save_verification(failed.id, {"algorithm": "x", "holds": False, "requirements": [
        {"name": "k^m", "required": "≥ 3", "measured": "1", "passed": False, "evidence": {}}]})
    runs.fail_run(failed.id, actor="flow", error="VerificationFailed: k^m: 1")
    client = signed_in(app, "rita", creds["rita"])
    page = client.get(f"/runs/{failed.id}").text
    assert "can never be published" in page and "Approve and publish" not in page
    token = csrf_of(client, "/")
    response = client.post(f"/runs/{failed.id}/decision",
                           data={"decision": "approve", "reason": "ship it", "csrf": token})
    assert "refused" in response.headers["location"]
    assert runs.get_approval(failed.id) is None and resumed == []
    assert runs.get_run(failed.id).status == Status.FAILED
