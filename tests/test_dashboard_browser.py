"""The reviewer dashboard in a real browser (Debian's headless Chromium, driven by Playwright).

A real release flow pauses at the approval gate; a steward is refused, a reviewer signs in,
downloads the certificate, approves with a reason, and watches the run get published.
Set ``EHR_RELEASE_SCREENSHOTS=DIR`` to keep the screenshots for a human to look at.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from ehr_release.storage import runs
from ehr_release.storage.audit import export_events, verify_chain
from ehr_release.storage.runs import Status
from ehr_release.storage.users import add_user
from tests.flow_helpers import start, wait_status

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.slow


@pytest.fixture
def chromium_path() -> Path:
    if not CHROMIUM.exists():
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is required (apt-get install chromium) but missing")
        pytest.skip(f"{CHROMIUM} not installed")
    return CHROMIUM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dashboard_url(env):
    import uvicorn

    from ehr_release.dashboard.app import create_app

    port = _free_port()
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


def _sign_in(page, url: str, name: str, credential: str) -> None:
    page.goto(f"{url}/login")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Credential").fill(credential)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{url}/")


def _keep(shot: Path) -> None:
    keep = os.environ.get("EHR_RELEASE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


def test_reviewer_approves_in_the_browser_and_steward_is_refused(
        env, dashboard_url, chromium_path, tmp_path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from ehr_release.request import ReleaseRequest

    data, out = env
    request = ReleaseRequest(run_id=runs.new_run_id(), input_path=str(data),
                             algorithm="disassociation", params={"k": "3", "m": "2"},
                             requester="steward.sam", out_dir=str(out), approval_timeout_s=300)
    steward = add_user("steward.sam", "steward")
    reviewer = add_user("rita", "reviewer")
    thread, box = start(request)
    assert wait_status(request.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL, box

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium_path),
                                    args=["--no-sandbox", "--disable-gpu"])
        try:
            # A steward sees the run but no decision form; a forged POST is refused.
            page = browser.new_context().new_page()
            _sign_in(page, dashboard_url, "steward.sam", steward)
            page.get_by_role("link", name=request.run_id).first.click()
            expect(page.get_by_text("Your role (steward) may not decide releases")).to_be_visible()
            assert page.get_by_role("button", name="Approve and publish").count() == 0
            csrf = page.locator('input[name="csrf"]').first.get_attribute("value")
            forged = page.request.post(f"{dashboard_url}/runs/{request.run_id}/decision",
                                       form={"decision": "approve", "reason": "me",
                                             "csrf": csrf or ""}, max_redirects=0)
            assert forged.status == 403
            assert runs.get_run(request.run_id).status == Status.AWAITING_APPROVAL

            # The reviewer reads the verification, downloads the certificate, approves.
            page = browser.new_context(accept_downloads=True).new_page()
            _sign_in(page, dashboard_url, "rita", reviewer)
            expect(page.get_by_role("heading", name="Awaiting approval (1)")).to_be_visible()
            page.get_by_role("link", name=request.run_id).first.click()
            expect(page.get_by_text("All requirements hold")).to_be_visible()
            with page.expect_download() as download:
                page.locator("#certificate-link").click()
            pdf = tmp_path / "certificate.pdf"
            download.value.save_as(pdf)
            assert pdf.read_bytes().startswith(b"%PDF")
            shot = tmp_path / "dashboard-pending.png"
            page.screenshot(path=str(shot), full_page=True)
            _keep(shot)

            page.get_by_label("Reason (recorded in the audit trail)").fill(
                "k^m verified; utility acceptable")
            page.get_by_role("button", name="Approve and publish").click()
            deadline = time.monotonic() + 120
            while page.locator("#run-status").inner_text() != Status.PUBLISHED:
                assert time.monotonic() < deadline, "run never shown as published"
                time.sleep(0.5)
                page.reload()
            shot = tmp_path / "dashboard-published.png"
            page.screenshot(path=str(shot), full_page=True)
            _keep(shot)
        finally:
            browser.close()

    thread.join(timeout=60)
    assert runs.get_run(request.run_id).status == Status.PUBLISHED
    assert runs.get_approval(request.run_id).reviewer == "rita"
    assert (out / "releases" / request.run_id / "datasheet.pdf").exists()
    trail = export_events(request.run_id, "jsonl")
    assert "approval.refused" in trail and "certificate.downloaded" in trail
    assert verify_chain().ok
