"""Issue 34's dashboard views in a real browser (Debian's Chromium, driven by Playwright).

One real release flow, started where an ARX user would start it: a steward opens a
comparison, reads its frontier chart and recommended row, and requests "release this row";
the flow verifies, attacks and parks it. A reviewer then reads the risk chart (the attack
audit's candidate-set sizes), the first rows of the candidate, follows the Prefect UI link
the dashboard found by itself (no ``PREFECT_UI_URL``: this home's running server, as
``ehr-release home`` prints it), and approves; the rows page then reads the published
folder. An auditor filters the audit page by event type and pages through it. Every page
must fit a laptop's screen (the checks of :mod:`tests.test_dashboard_browser`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ehr_release.storage import runs
from ehr_release.storage.audit import export_events, record_event, verify_chain
from ehr_release.storage.runs import Status
from ehr_release.storage.users import add_user
from tests.flow_helpers import start, wait_status
from tests.test_dashboard_browser import LAPTOP, _charts_drawn, _check_page, _sign_in
from tests.test_dashboard_views import _comparison, _Health  # noqa: F401 - a report as written

pytestmark = pytest.mark.slow


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    """This test's releases root, set before the site records one."""
    folder = tmp_path / "releases-root"
    folder.mkdir()
    monkeypatch.setenv("EHR_RELEASE_RELEASES_ROOT", str(folder))
    return folder


@pytest.fixture
def prefect_ui(ehr_home):
    """This home's local Prefect server as ``ehr-release`` records it (a stand-in that
    answers the health check)."""
    import http.server
    import json

    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ui = f"http://127.0.0.1:{server.server_address[1]}"
    ehr_home.mkdir(parents=True, exist_ok=True)
    (ehr_home / "prefect-server.json").write_text(json.dumps({"url": f"{ui}/api", "pid": 1}))
    yield ui
    server.shutdown()


def _serve(app) -> tuple[str, object, threading.Thread]:
    import socket

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "dashboard did not start"
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, thread


def test_comparison_to_published_with_risk_rows_prefect_and_audit_filters(
        root, env, prefect_ui, chromium_path, tmp_path, monkeypatch) -> None:
    from playwright.sync_api import expect, sync_playwright

    from ehr_release.dashboard.app import create_app
    from ehr_release.planning.plan import make_plan
    from ehr_release.planning.request import ReleaseRequest

    monkeypatch.delenv("PREFECT_UI_URL", raising=False)
    data, _ = env
    probe = ReleaseRequest(run_id=runs.new_run_id(), input_path=str(data),
                           algorithm="disassociation", params={"k": "3", "m": "2"},
                           requester="x", out_dir=str(root))
    folder = _comparison(root / "study", make_plan(probe).fingerprint)
    steward, reviewer = add_user("steward.sam", "steward"), add_user("rita", "reviewer")
    auditor = add_user("audrey", "auditor")
    flows: list = []
    url, server, thread = _serve(create_app(launch=lambda request: flows.append(
        (request, *start(request)))))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(chromium_path),
                                        args=["--no-sandbox", "--disable-gpu"])
            try:
                # The steward: frontier, recommended row, "release this row".
                page = browser.new_context(viewport=LAPTOP).new_page()
                _sign_in(page, url, "steward.sam", steward)
                page.get_by_role("link", name="Comparisons").click()
                page.get_by_role("link", name=folder.name).click()
                expect(page.locator("#recommended")).to_contain_text(
                    "Row 2: disassociation (k=3, m=2)")
                assert _charts_drawn(page) == 1  # the frontier chart, decoded
                _check_page(page, tmp_path, "comparison")
                page.locator("tr[data-row='2']").get_by_role("link",
                                                               name="release this row").click()
                expect(page.get_by_label("Row")).to_have_value("2")
                page.get_by_label("Patients file on this server").fill(str(data))
                page.get_by_label("Recipient").fill("Cardiology study group")
                page.get_by_role("button", name="Request this release").click()
                (request, flow_thread, box), = flows
                page.wait_for_url(f"{url}/runs/{request.run_id}")
                assert wait_status(request.run_id, {Status.AWAITING_APPROVAL, Status.FAILED},
                                   timeout=180) == Status.AWAITING_APPROVAL, box
                assert (request.comparison_id, request.comparison_row) == (folder.name, 2)

                # The reviewer: risk chart, first rows, Prefect link; approves.
                page = browser.new_context(viewport=LAPTOP).new_page()
                _sign_in(page, url, "rita", reviewer)
                page.goto(f"{url}/runs/{request.run_id}")
                expect(page.locator("#run-status")).to_have_text("awaiting approval")
                bars = page.locator("#risk .bar-row")
                assert bars.count() >= 1
                assert page.locator("#risk .bar-row.below").count() == 0  # all ≥ k
                widths = page.eval_on_selector_all(
                    "#risk .bar", "bars => bars.map(b => b.getBoundingClientRect().width)")
                assert max(widths) > 50 and all(w >= 1 for w in widths)  # drawn bars
                expect(page.locator("#risk figcaption")).to_contain_text("at least 3")
                flow_run = runs.get_run(request.run_id).flow_run_id
                assert page.locator("#prefect-flow-run").get_attribute("href") == \
                    f"{prefect_ui}/runs/flow-run/{flow_run}"
                _check_page(page, tmp_path, "risk")
                page.locator("#rows-link").click()
                expect(page.locator("#rows-origin")).to_contain_text("From the candidate")
                table = page.locator("table.rows").first
                expect(table).to_be_visible()
                assert table.locator("tbody tr").count() >= 1
                _check_page(page, tmp_path, "rows-candidate")
                page.goto(f"{url}/runs/{request.run_id}")
                page.get_by_label("Reason (recorded in the audit trail)").fill(
                    "row 2 of the comparison; risk acceptable")
                page.get_by_role("button", name="Approve and publish").click(timeout=120_000)
                expect(page.locator("#run-status")).to_have_text(Status.PUBLISHED,
                                                                 timeout=120_000)
                page.locator("#rows-link").click()
                expect(page.locator("#rows-origin")).to_contain_text(
                    "From the published release folder")
                assert page.locator("table.rows tbody tr").count() >= 1

                # The auditor: filter by event type, then page through everything.
                for i in range(60):
                    record_event(actor="filler", action="certificate.downloaded",
                                 payload={"i": i})
                page = browser.new_context(viewport=LAPTOP).new_page()
                _sign_in(page, url, "audrey", auditor)
                page.get_by_role("link", name="Audit trail").click()
                page.get_by_label("Event type").select_option("run.approved")
                page.get_by_role("button", name="Filter").click()
                expect(page.locator("#audit-count")).to_contain_text(
                    "1 event matches the filter")
                expect(page.locator("#audit tbody tr")).to_have_count(1)
                expect(page.locator("#audit")).to_contain_text(
                    "row 2 of the comparison; risk acceptable")
                page.get_by_role("link", name="clear").click()
                expect(page.locator("#audit tbody tr")).to_have_count(50)
                page.get_by_role("link", name="older ›").first.click()
                expect(page.locator("#audit-count")).to_contain_text("page 2 of")
                _check_page(page, tmp_path, "audit-filtered")
            finally:
                browser.close()
        flow_thread.join(timeout=60)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert runs.get_run(request.run_id).status == Status.PUBLISHED
    assert (root / "study" / "releases" / request.run_id / "manifest.json").exists()
    trail = export_events(request.run_id, "jsonl")
    assert trail.count("release.rows_viewed") == 2 and "run.approved" in trail
    assert verify_chain().ok
