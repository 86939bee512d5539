"""The reviewer dashboard in process (TestClient): sign-in, roles, CSRF, escaping, decisions."""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from ehr_release.dashboard.app import COOKIE, create_app
from ehr_release.dashboard.format import number as format_number
from ehr_release.storage import pending, runs
from ehr_release.storage.audit import export_events, record_event, verify_chain
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
    assert response.status_code == 403 and "requested this run" in response.text
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
    assert response.status_code == 409 and "Refused: run" in response.text
    assert runs.get_approval(failed.id) is None and resumed == []
    assert runs.get_run(failed.id).status == Status.FAILED


# --- Issue 16: a dashboard made for the reviewers and auditors who use it -------------------


def tiny_png() -> bytes:
    """A valid 1×1 PNG, built by hand so the chart tests need no plotting library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


def park(run_id: str, *, charts: list[dict] | None = None, records: int | None = 10_000,
         data_use: dict | None = None, expires_at: str = "2030-01-02T03:04:05+00:00") -> None:
    """What the release flow persists for a run awaiting approval (see bundle.park)."""
    pending.save_pending(pending.PendingRelease(
        run_id=run_id, candidate_dir="/nonexistent", verification_json="{}",
        utility_json=json.dumps({"algorithm": "code-counts", "metrics": {},
                                 "charts": charts or []}),
        outcome_json=json.dumps({"records": records, "waivers": [], "attack": {
            "attacker_model": "knows 2 codes", "knowledge_sets_tried": 40, "exhaustive": True,
            "smallest_candidate_set": 4, "threshold": 3, "passed": True, "measured": "",
            "required": "", "seconds": 0.1}}),
        data_use_json=json.dumps(data_use or {"recipient": "Cardiology study group",
                                              "purpose": "readmission research",
                                              "terms": "no linkage"}),
        expires_at=expires_at))


class _TextOf(HTMLParser):
    """Collects the text inside the element whose id is ``wanted`` (nesting respected)."""

    VOID = {"br", "img", "input", "meta", "hr", "link"}

    def __init__(self, wanted: str) -> None:
        super().__init__()
        self.wanted, self.depth, self.found, self.parts = wanted, 0, False, []

    def handle_starttag(self, tag, attrs) -> None:
        if tag in self.VOID:
            return
        if self.depth:
            self.depth += 1
        elif dict(attrs).get("id") == self.wanted:
            self.depth, self.found = 1, True

    def handle_endtag(self, tag) -> None:
        if self.depth and tag not in self.VOID:
            self.depth -= 1
            self.parts.append(" ")

    def handle_data(self, data) -> None:
        if self.depth:
            self.parts.append(data)


def text_of(html: str, element_id: str) -> str:
    """The text of the element with ``element_id`` (tags stripped, spaces collapsed)."""
    parser = _TextOf(element_id)
    parser.feed(html)
    assert parser.found, f"no element #{element_id}"
    return " ".join("".join(parser.parts).split())


@pytest.mark.parametrize(("value", "shown"), [
    (10_000.0, "10,000"), (12, "12"), (0.99712, "0.9971"), (174_712.3, "174,700"),
    (0.0015, "0.0015"), (1.5e-6, "1.5 × 10⁻⁶"), (float("nan"), "n/a"), (True, "yes")])
def test_numbers_read_as_people_write_them(value, shown) -> None:
    assert format_number(value) == shown


def test_run_page_formats_figures(world) -> None:
    run_id, creds, _, app = world
    runs.save_utility(run_id, {"algorithm": "code-counts", "metrics": {
        "records": 10_000.0, "ARE": 0.99712, "tiny": 1.5e-06}})
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    utility = text_of(page, "utility")
    assert "records 10,000" in utility and "ARE 0.9971" in utility
    assert "e+0" not in utility and "e-0" not in utility


def test_run_page_explains_each_figure_with_its_scale(world) -> None:
    """Issue 34 finding 7: no bare jargon row — each figure has its words and scale, from
    the same registry as the certificate, and a share reads as a percentage."""
    run_id, creds, _, app = world
    runs.save_utility(run_id, {"algorithm": "disassociation", "metrics": {
        "MRE within ±5% (share)": 0.925, "ARE W2 (estimator)": 0.3,
        "MRE median % (one record per item code)": -372.8}})
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    utility = text_of(page, "utility")
    assert "MRE within ±5% (share) 92.5 %" in utility and "higher is better" in utility
    assert "ARE W2 (estimator) 0.3" in utility and "0 is exact" in utility
    assert "-372.8 %" in utility and "matches invented" in utility


def test_refusals_after_a_decision_post_are_html_pages(world) -> None:
    run_id, creds, _, app = world
    client = signed_in(app, "rita", creds["rita"])
    token = csrf_of(client, f"/runs/{run_id}")
    blank = client.post(f"/runs/{run_id}/decision",
                        data={"decision": "approve", "reason": "   ", "csrf": token})
    assert blank.status_code == 400 and blank.headers["content-type"].startswith("text/html")
    assert "Refused: a reason is required" in text_of(blank.text, "decision-error")
    assert 'action="/runs/' in blank.text  # the form is still there to try again
    assert client.post(f"/runs/{run_id}/decision", data={
        "decision": "reject", "reason": "no", "csrf": token}).status_code == 303
    again = client.post(f"/runs/{run_id}/decision",
                        data={"decision": "approve", "reason": "yes", "csrf": token})
    assert again.status_code == 409 and again.headers["content-type"].startswith("text/html")
    assert "already decided" in text_of(again.text, "decision-error")
    assert '{"detail"' not in again.text and "Traceback" not in again.text


def test_a_publisher_that_fails_leaves_an_html_page_naming_the_next_step(world) -> None:
    run_id, creds, _, _ = world

    def broken(_: str) -> Status:
        raise RuntimeError("Prefect API unreachable at http://127.0.0.1:4200/api")

    client = signed_in(create_app(publish=broken), "rita", creds["rita"])
    token = csrf_of(client, f"/runs/{run_id}")
    page = client.post(f"/runs/{run_id}/decision",
                       data={"decision": "approve", "reason": "fine", "csrf": token})
    assert page.status_code == 502 and page.headers["content-type"].startswith("text/html")
    assert "Decision recorded, but publishing did not finish" in page.text
    assert text_of(page.text, "run-status") == "stalled"
    assert f"ehr-release publish {run_id}" in text_of(page.text, "next-step")


def test_after_approval_the_page_shows_the_status_the_run_ended_in(world) -> None:
    run_id, creds, _, _ = world

    def publish(rid: str) -> Status:
        runs.transition(rid, Status.PUBLISHED, actor="system:publish_flow")
        return Status.PUBLISHED

    client = signed_in(create_app(publish=publish), "rita", creds["rita"])
    token = csrf_of(client, f"/runs/{run_id}")
    done = client.post(f"/runs/{run_id}/decision",
                       data={"decision": "approve", "reason": "fine", "csrf": token})
    assert done.headers["location"] == f"/runs/{run_id}?decided=1"
    page = client.get(done.headers["location"]).text
    assert text_of(page, "run-status") == "published"
    assert text_of(page, "decision-notice") == ("Decision recorded: approve by rita. "
                                                "The run is now published.")
    recent = text_of(client.get("/").text, "recent")
    assert "published" in recent and "approved" not in recent


def test_a_notice_cannot_be_put_on_the_page_through_the_url(world) -> None:
    run_id, creds, _, app = world
    client = signed_in(app, "rita", creds["rita"])
    page = client.get(f"/runs/{run_id}?decided=1&notice=approved+by+the+board").text
    assert "the board" not in page and 'id="decision-notice"' not in page


def test_a_run_whose_flow_died_is_stalled_with_the_command_that_continues_it(world) -> None:
    run_id, creds, _, app = world
    engine = get_engine()
    died = make_run(engine, requester="steward.sam")
    runs.transition(died.id, Status.ANONYMIZED, actor="flow", engine=engine)
    client = signed_in(app, "rita", creds["rita"])
    page = client.get(f"/runs/{died.id}").text
    assert text_of(page, "run-status") == "stalled"
    assert f"ehr-release resume {died.id}" in text_of(page, "next-step")
    assert 'http-equiv="refresh"' not in page  # nothing will change by itself
    recent = text_of(client.get("/").text, "recent")
    assert "stalled" in recent and f"ehr-release resume {died.id}" in recent

    # The publisher did nothing: approved, no flow holds it, so it is stalled too.
    token = csrf_of(client, f"/runs/{run_id}")
    client.post(f"/runs/{run_id}/decision",
                data={"decision": "approve", "reason": "fine", "csrf": token})
    page = client.get(f"/runs/{run_id}?decided=1").text
    assert text_of(page, "run-status") == "stalled"
    assert f"ehr-release publish {run_id}" in text_of(page, "decision-notice")


def test_a_run_a_flow_works_on_shows_its_status_and_reloads_itself(world) -> None:
    _, creds, _, app = world
    engine = get_engine()
    working = make_run(engine, requester="steward.sam")
    runs.transition(working.id, Status.ANONYMIZED, actor="flow", engine=engine)
    client = signed_in(app, "rita", creds["rita"])
    with pending.hold_lease(working.id, "release_flow"):
        page = client.get(f"/runs/{working.id}").text
    assert text_of(page, "run-status") == "anonymized"
    assert '<meta http-equiv="refresh" content="5">' in page


def test_own_requests_are_marked_and_get_no_decision_form(world) -> None:
    other_id, creds, _, app = world
    engine = get_engine()
    own = make_run(engine, requester=" Rita ")  # the four-eyes rule ignores case and spaces
    to_awaiting(own.id, engine)
    creds["rex"] = add_user("rex", "reviewer")
    rita = signed_in(app, "rita", creds["rita"])
    rows = re.findall(r"<tr[^>]*>.*?</tr>", text_of_table(rita.get("/").text, "pending"), re.S)
    marked = {rid for rid in (own.id, other_id) for row in rows
              if rid in row and "needs another reviewer" in row}
    assert marked == {own.id}
    page = rita.get(f"/runs/{own.id}").text
    assert "needs another reviewer" in text_of(page, "own-request")
    assert 'action="/runs/' not in page and "Approve and publish" not in page
    assert "Approve and publish" in rita.get(f"/runs/{other_id}").text
    rex = signed_in(app, "rex", creds["rex"])
    assert "needs another reviewer" not in text_of_table(rex.get("/").text, "pending")
    assert "Approve and publish" in rex.get(f"/runs/{own.id}").text


def text_of_table(html: str, element_id: str) -> str:
    match = re.search(rf'<table id="{element_id}"[^>]*>(.*?)</table>', html, re.S)
    assert match, f"no table #{element_id}"
    return match.group(1)


def test_auditors_see_every_events_payload_formatted(world) -> None:
    run_id, creds, _, app = world
    record_event(actor="rita", action="certificate.downloaded", run_id=run_id,
                 payload={"file": "certificate-draft.pdf", "nested": {"k": 3}})
    client = signed_in(app, "audrey", creds["audrey"])
    table = text_of_table(client.get("/audit").text, "audit")
    assert "<dt>file</dt><dd>certificate-draft.pdf</dd>" in table
    assert '<dt>nested</dt><dd>{&#34;k&#34;: 3}</dd>' in table
    assert "<dt>dataset_rows</dt><dd>10</dd>" in table  # run.requested's payload
    assert "<dt>to</dt><dd>awaiting_approval</dd>" in table
    run_page = text_of_table(client.get(f"/runs/{run_id}").text, "run-audit")
    assert "<dt>file</dt><dd>certificate-draft.pdf</dd>" in run_page


def test_run_page_shows_the_certificates_charts_and_a_plain_summary(world) -> None:
    run_id, creds, _, app = world
    png = base64.b64encode(tiny_png()).decode()
    park(run_id, charts=[{"name": "mre", "caption": "MRE per constraint", "png": png},
                         {"name": "bad", "caption": "not a picture",
                          "png": base64.b64encode(b"<svg onload=alert(1)>").decode()}])
    runs.pin_candidate(run_id, {"release.json": ("ab" * 32, 12_345)})
    runs.save_verification(run_id, {"algorithm": "code-counts", "holds": True, "requirements": [
        {"name": "k", "required": "≥ 3", "measured": "4", "passed": True, "evidence": {}}]})
    runs.save_utility(run_id, {"algorithm": "code-counts", "metrics": {"records": 1e4},
                               "notes": ["Counts within 5 % of the original."],
                               "below_baseline": ["accuracy 53.9 % below the trivial 60 %"]})
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    assert f'<img src="data:image/png;base64,{png}" alt="MRE per constraint">' in page
    assert "not a picture" not in page  # a chart that is not a PNG is left out
    summary = text_of(page, "summary")
    assert "10,000 patient records in 1 file: release.json (12.3 kB)" in summary
    assert "recipient: Cardiology study group" in summary and "terms: no linkage" in summary
    assert "all 1 requirements hold" in summary
    assert "failed to single anyone out" in summary
    assert "POOR — below a trivial baseline: accuracy 53.9 %" in summary
    assert "Counts within 5 % of the original." in summary
    assert 'class="fail"><span class="label">Utility:' in page


def test_a_run_without_charts_of_its_own_gets_the_certificates_figures_chart(world) -> None:
    run_id, creds, _, app = world
    park(run_id)
    runs.save_utility(run_id, {"algorithm": "code-counts",
                               "metrics": {"ARE": 0.25, "records": 12.0}})
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    (src,) = re.findall(r'<img src="(data:image/png;base64,[^"]+)"', page)
    assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG")


def test_awaiting_run_shows_destination_and_when_its_approval_window_closes(world) -> None:
    run_id, creds, _, app = world
    park(run_id, expires_at="2030-01-02T03:04:05+00:00")
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    assert text_of(page, "expires").startswith("closes 2030-01-02 03:04:05 UTC")
    assert text_of(page, "destination") == f"/tmp/releases/{run_id}"
    assert "2030-01-02 03:04:05 UTC" in text_of_table(
        signed_in(app, "rita", creds["rita"]).get("/").text, "pending")


def test_prefect_flow_run_is_linked_only_when_the_ui_is_configured(world, monkeypatch) -> None:
    run_id, creds, _, app = world
    flow_run = "0b6e6c1e-3a4f-4d4c-9a43-5f1f3c2a7e11"
    runs.set_flow_run_id(run_id, flow_run)
    client = signed_in(app, "rita", creds["rita"])
    monkeypatch.delenv("PREFECT_UI_URL", raising=False)
    assert "Prefect UI not found" in text_of(client.get(f"/runs/{run_id}").text, "prefect")
    monkeypatch.setenv("PREFECT_UI_URL", "javascript:alert(1)//")
    assert "Prefect UI not found" in text_of(client.get(f"/runs/{run_id}").text, "prefect")
    monkeypatch.setenv("PREFECT_UI_URL", "http://127.0.0.1:4200/")
    page = client.get(f"/runs/{run_id}").text
    assert f'href="http://127.0.0.1:4200/runs/flow-run/{flow_run}"' in page
    assert f'href="http://127.0.0.1:4200/runs/flow-run/{flow_run}?tab=Artifacts"' in page


def test_datasheet_is_linked_beside_the_certificate_published_over_draft(world, tmp_path) -> None:
    run_id, creds, _, app = world
    client = signed_in(app, "rita", creds["rita"])
    assert "Datasheet: not rendered yet" in client.get(f"/runs/{run_id}").text
    assert client.get(f"/runs/{run_id}/datasheet.pdf").status_code == 404
    draft, final = tmp_path / "datasheet-draft.pdf", tmp_path / "datasheet.pdf"
    draft.write_bytes(b"%PDF-draft")
    final.write_bytes(b"%PDF-final")
    runs.record_artifacts(run_id, [("datasheet-draft", str(draft), "00" * 32, 10)])
    page = client.get(f"/runs/{run_id}").text
    assert "Datasheet (datasheet-draft.pdf)" in text_of(page, "datasheet-link")
    assert client.get(f"/runs/{run_id}/datasheet.pdf").content == b"%PDF-draft"
    runs.record_artifacts(run_id, [("published", str(final), "11" * 32, 10)])
    assert client.get(f"/runs/{run_id}/datasheet.pdf").content == b"%PDF-final"
    assert "datasheet.downloaded" in export_events(run_id, "jsonl")


def test_a_closed_approval_window_shows_the_run_rejected_without_a_form(world) -> None:
    run_id, creds, _, app = world
    park(run_id, expires_at="2001-01-01T00:00:00+00:00")
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    assert text_of(page, "run-status") == "rejected"
    assert "Approve and publish" not in page and 'id="expires"' not in page


def test_the_guarantee_reads_as_on_the_certificate(ehr_home) -> None:
    """One wording for the guarantee: the certificate's sentence, with the run's own k and m."""
    from ehr_release.dashboard.summary import plain_summary
    from ehr_release.documents.plain import guarantee_sentence
    from ehr_release.registry import get
    from ehr_release.storage.models import DatasetRecord

    ds = DatasetRecord(fingerprint="ab" * 32, rows=10, codes=30, columns_json="{}", source="x")
    run = runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester="sam",
                          algorithm="disassociation", parameters={"k": "7", "m": "3"},
                          out_dir="/tmp")
    (line,) = [x for x in plain_summary(run, None, None, None) if x.label == "Guarantee"]
    entry = get("disassociation")
    assert line.text == guarantee_sentence(entry.name, entry.privacy_model,
                                           entry.parse({"k": "7", "m": "3"}))
    assert "up to 3 of a patient's diagnosis codes" in line.text and "at least 7" in line.text


def test_the_publish_flow_run_is_linked_from_its_published_event(monkeypatch) -> None:
    """The publishing flow's id travels in the run.published audit event (issue 16)."""
    import json as _json
    from types import SimpleNamespace

    from ehr_release.dashboard.documents import prefect_links

    monkeypatch.setenv("PREFECT_UI_URL", "http://127.0.0.1:4200")
    run = SimpleNamespace(flow_run_id="0b6e6c1e-3a4f-4d4c-9a43-5f1f3c2a7e11")
    publish = "5d1c0e6f-1111-4a4c-9a43-000000000001"

    def event(action: str, payload: dict) -> SimpleNamespace:
        return SimpleNamespace(action=action, payload_json=_json.dumps(payload))

    links = prefect_links(run, [event("run.approved", {}),
                                event("run.published", {"flow_run_id": publish})])
    assert links.publish_flow_run == f"http://127.0.0.1:4200/runs/flow-run/{publish}"
    assert prefect_links(run, [event("run.approved", {})]).publish_flow_run is None
    forged = prefect_links(run, [event("run.published", {"flow_run_id": "javascript:x"})])
    assert forged.publish_flow_run is None and forged.flow_run is not None
