"""The reviewer dashboard in a real browser (Debian's headless Chromium, driven by Playwright).

A real release flow pauses at the approval gate; a steward is refused, a reviewer signs in,
finds her own request marked and a dead flow shown as stalled, reads the summary and charts,
downloads the certificate and datasheet, approves with a reason, and watches the run get
published; an auditor reads every event's details. On every page the test checks that
nothing sticks out sideways at a laptop's viewport and takes a full-page screenshot. Set
``EHR_RELEASE_SCREENSHOTS=DIR`` to keep the screenshots for a human to look at.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from ehr_release.storage import runs
from ehr_release.storage.audit import export_events, verify_chain
from ehr_release.storage.runs import Status
from ehr_release.storage.users import add_user
from tests.flow_helpers import free_port, start, wait_status

pytestmark = pytest.mark.slow


@pytest.fixture
def dashboard_url(env):
    import uvicorn

    from ehr_release.dashboard.app import create_app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "dashboard did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


#: A typical laptop screen (the most common one); every page must fit it without scrolling
#: sideways.
LAPTOP = {"width": 1366, "height": 768}
FLOW_UI = "http://127.0.0.1:4200"

#: Everything that sticks out to the right of the viewport, every table cell whose content
#: spills out of it, and the page's own widths.
_OVERFLOW_JS = """() => {
  const limit = document.documentElement.clientWidth;
  const out = el => el.getBoundingClientRect().right > limit + 0.5;
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '');
  return {
    scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
    clientWidth: limit,
    tables: [...document.querySelectorAll('table')].filter(out).map(name),
    elements: [...document.body.querySelectorAll('*')].filter(out).map(name).slice(0, 10),
    cells: [...document.querySelectorAll('td, th')]
      .filter(c => c.scrollWidth > c.clientWidth + 1)
      .map(c => name(c.closest('table')) + ': ' + c.textContent.trim().slice(0, 40)).slice(0, 10),
  };
}"""


def _sign_in(page, url: str, name: str, credential: str) -> None:
    page.goto(f"{url}/login")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Credential").fill(credential)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{url}/")


def _check_page(page, tmp_path: Path, name: str) -> None:
    """Nothing overflows sideways; a full-page screenshot (kept if asked) for a human."""
    fit = page.evaluate(_OVERFLOW_JS)
    assert fit["scrollWidth"] <= fit["innerWidth"], (name, fit)
    assert fit["scrollWidth"] <= fit["clientWidth"], (name, fit)
    assert not fit["tables"] and not fit["elements"] and not fit["cells"], (name, fit)
    shot = tmp_path / f"dashboard-{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)


def _keep(shot: Path) -> None:
    keep = os.environ.get("EHR_RELEASE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


def _charts_drawn(page) -> int:
    """How many chart images the browser actually decoded (a broken data: URI has width 0)."""
    return int(page.evaluate(
        "() => [...document.querySelectorAll('figure.chart img')]"
        ".filter(i => i.complete && i.naturalWidth > 0).length"))


def test_reviewer_approves_in_the_browser_and_steward_is_refused(
        env, dashboard_url, chromium_path, tmp_path, monkeypatch) -> None:
    from playwright.sync_api import expect, sync_playwright

    from ehr_release.planning.request import ReleaseRequest
    from ehr_release.storage.engine import get_engine
    from tests.test_storage import make_run, to_awaiting

    monkeypatch.setenv("PREFECT_UI_URL", FLOW_UI)
    data, out = env
    request = ReleaseRequest(run_id=runs.new_run_id(), input_path=str(data),
                             algorithm="disassociation", params={"k": "3", "m": "2"},
                             requester="steward.sam", out_dir=str(out), approval_timeout_s=300,
                             recipient="Cardiology study group", purpose="readmission research",
                             terms="no linkage")
    steward = add_user("steward.sam", "steward")
    reviewer = add_user("rita", "reviewer")
    auditor = add_user("audrey", "auditor")
    own = make_run(get_engine(), requester="rita")  # rita's own request: not hers to decide
    to_awaiting(own.id, get_engine())
    died = make_run(get_engine(), requester="steward.sam")  # a flow that died midway
    runs.transition(died.id, Status.ANONYMIZED, actor="flow")
    thread, box = start(request)
    assert wait_status(request.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL, box

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium_path),
                                    args=["--no-sandbox", "--disable-gpu"])
        try:
            # A steward sees the run but no decision form; a forged POST is refused.
            page = browser.new_context(viewport=LAPTOP).new_page()
            _sign_in(page, dashboard_url, "steward.sam", steward)
            page.get_by_role("link", name=request.run_id).first.click()
            expect(page.get_by_text("Your role (steward) may not decide releases")).to_be_visible()
            assert page.get_by_role("button", name="Approve and publish").count() == 0
            csrf = page.locator('input[name="csrf"]').first.get_attribute("value")
            forged = page.request.post(f"{dashboard_url}/runs/{request.run_id}/decision",
                                       form={"decision": "approve", "reason": "me",
                                             "csrf": csrf or ""}, max_redirects=0)
            assert forged.status == 403
            assert "text/html" in forged.headers["content-type"]
            assert runs.get_run(request.run_id).status == Status.AWAITING_APPROVAL

            # The reviewer's queue: her own request is marked, the dead flow is stalled.
            page = browser.new_context(viewport=LAPTOP, accept_downloads=True).new_page()
            _sign_in(page, dashboard_url, "rita", reviewer)
            expect(page.get_by_role("heading", name="Awaiting approval (2)")).to_be_visible()
            own_row = page.locator("#pending tr", has_text=own.id)
            expect(own_row.get_by_text("needs another reviewer")).to_be_visible()
            other_row = page.locator("#pending tr", has_text=request.run_id)
            expect(other_row.get_by_text("needs another reviewer")).to_have_count(0)
            died_row = page.locator("#recent tr", has_text=died.id)
            expect(died_row.locator(".status")).to_have_text("stalled")
            expect(died_row.get_by_text(f"ehr-release resume {died.id}")).to_be_visible()
            _check_page(page, tmp_path, "index")

            page.locator("#pending").get_by_role("link", name=own.id).click()
            expect(page.locator("#own-request")).to_be_visible()
            assert page.get_by_role("button", name="Approve and publish").count() == 0

            # She reads the summary, charts and verification, downloads both documents.
            page.goto(f"{dashboard_url}/runs/{request.run_id}")
            expect(page.locator("#run-status")).to_have_text("awaiting approval")
            expect(page.get_by_text("All requirements hold")).to_be_visible()
            summary = page.locator("#summary")
            expect(summary).to_be_visible()
            expect(summary).to_contain_text("12 patient records")
            expect(summary).to_contain_text("recipient: Cardiology study group")
            expect(page.locator("figure.chart img").first).to_be_visible()
            assert _charts_drawn(page) >= 1
            expect(page.locator("#expires")).to_be_visible()
            expect(page.locator("#destination")).to_have_text(
                f"{out}/releases/{request.run_id}")
            flow_link = page.locator("#prefect-flow-run")
            expect(flow_link).to_be_visible()
            flow_run = runs.get_run(request.run_id).flow_run_id
            assert flow_link.get_attribute("href") == f"{FLOW_UI}/runs/flow-run/{flow_run}"
            for link in ("#certificate-link", "#datasheet-link"):
                expect(page.locator(link)).to_be_visible()
                with page.expect_download() as download:
                    page.locator(link).click()
                pdf = tmp_path / f"{link[1:]}.pdf"
                download.value.save_as(pdf)
                assert pdf.read_bytes().startswith(b"%PDF")
            _check_page(page, tmp_path, "pending")

            # An empty reason is refused on an HTML page that keeps the form.
            page.get_by_label("Reason (recorded in the audit trail)").fill("   ")
            page.get_by_role("button", name="Approve and publish").click()
            expect(page.locator("#decision-error")).to_contain_text("a reason is required")
            _check_page(page, tmp_path, "refused")

            # She approves; the page follows the run until it is published.
            page.get_by_label("Reason (recorded in the audit trail)").fill(
                "k^m verified; utility acceptable")
            page.get_by_role("button", name="Approve and publish").click(timeout=120_000)
            expect(page.locator("#run-status")).to_have_text(Status.PUBLISHED, timeout=120_000)
            expect(page.locator("#decision-notice")).to_contain_text(
                "Decision recorded: approve by rita. The run is now published.")
            expect(page.locator("#datasheet-link")).to_contain_text("datasheet.pdf")
            expect(page.locator("#run-audit").get_by_text("run.published")).to_be_visible()
            _check_page(page, tmp_path, "published")

            page.goto(f"{dashboard_url}/")
            expect(page.locator("#recent tr", has_text=request.run_id).locator(".status")
                   ).to_have_text("published")

            # An auditor reads every event's details.
            page = browser.new_context(viewport=LAPTOP).new_page()
            _sign_in(page, dashboard_url, "audrey", auditor)
            page.get_by_role("link", name="Audit trail").click()
            approved = page.locator("#audit tr", has_text="run.approved")
            expect(approved.get_by_text("k^m verified; utility acceptable")).to_be_visible()
            expect(approved.locator("dt", has_text="channel")).to_be_visible()
            _check_page(page, tmp_path, "audit")

            # Errors are pages, not JSON.
            missing = page.goto(f"{dashboard_url}/runs/rel-{'0' * 32}")
            assert missing is not None and missing.status == 404
            expect(page.get_by_role("heading", name="404 Not Found")).to_be_visible()
            expect(page.get_by_role("alert")).to_have_text("no such run")
            _check_page(page, tmp_path, "error")
        finally:
            browser.close()

    thread.join(timeout=60)
    assert runs.get_run(request.run_id).status == Status.PUBLISHED
    assert runs.get_approval(request.run_id).reviewer == "rita"
    assert (out / "releases" / request.run_id / "datasheet.pdf").exists()
    trail = export_events(request.run_id, "jsonl")
    assert "approval.refused" in trail and "certificate.downloaded" in trail
    assert "datasheet.downloaded" in trail
    assert verify_chain().ok
