"""The README's dashboard block, run as written and driven in Chromium (issue 34).

Found: the docs test skipped the block (it serves until stopped), so nobody saw a new user
request a release, approve it on the page and get it published. Here the block runs in a
fresh home with nothing beside it (its port swapped for a free one), the steward it creates
requests a release with his credential as the README says, and the reviewer it creates
approves it in Chromium; the page must follow the run to ``published`` and link the run's
flow in the Prefect UI that ``ehr-release home`` names. The dashboard process is stopped by
its id; the Prefect server the run started, by ``ehr-release server stop``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ehr_release.samples.sample import generate_sample, write_sample
from tests.flow_helpers import free_port
from tests.test_dashboard_browser import LAPTOP, _sign_in
from tests.test_docs_run import readme_blocks

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the virtual environment's bin (ehr-release)
FIRST_LINE = "ehr-release users add rita --role reviewer"
STEP_TIMEOUT_S = 600


def dashboard_block() -> str:
    """The README's dashboard block (it starts with the first ``users add``)."""
    blocks = readme_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    (block,) = [b for b in blocks if b.body.lstrip().startswith(FIRST_LINE)]
    return block.body


def test_readme_dashboard_block_request_approve_on_the_page_published(
        tmp_path, chromium_path) -> None:
    from playwright.sync_api import expect, sync_playwright

    root, home = tmp_path / "project", tmp_path / "project" / "home"
    root.mkdir()
    write_sample(generate_sample(60, seed=34), root / "extract.csv")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "EHR_RELEASE_", "VIRTUAL_ENV"))}
    env.update(EHR_RELEASE_HOME=str(home), EHR_RELEASE_RELEASES_ROOT=str(root / "out"),
               PATH=f"{BIN}:{os.defpath}", PYTHONPATH=str(REPO / "src"))
    body = dashboard_block()
    port = free_port()
    assert "--port 8765" in body
    added = re.findall(r"^ehr-release users add (\S+) --role (\S+)", body, re.M)
    log = (tmp_path / "dashboard.log").open("wb")
    block = subprocess.Popen(["bash", "-e", "-c", body.replace("--port 8765", f"--port {port}")],
                             cwd=root, env=env, stdout=subprocess.PIPE, stderr=log,
                             start_new_session=True)
    try:
        assert block.stdout is not None
        creds = {name: block.stdout.readline().decode().strip() for name, _ in added}
        assert all(creds.values()), (creds, (tmp_path / "dashboard.log").read_text())
        url = f"http://127.0.0.1:{port}"
        _wait_for(url, block, tmp_path / "dashboard.log")
        # In the README's order the "Using it" block ran first and left the home's Prefect
        # server running; start it here (a busy machine may need more than one start's 90 s).
        for _ in range(2):
            if subprocess.run(["ehr-release", "server", "start"], cwd=root, env=env,
                              capture_output=True, timeout=STEP_TIMEOUT_S).returncode == 0:
                break
        steward = next(name for name, role in added if role == "steward")
        requested = subprocess.run(
            ["ehr-release", "run", "--input", "extract.csv", "--algorithm", "disassociation",
             "--param", "k=5", "--param", "m=2", "--requester", steward,
             "--out", "out/study12"],
            cwd=root, env={**env, "EHR_RELEASE_CREDENTIAL": creds[steward]},
            capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
        assert requested.returncode == 0, requested.stderr[-3000:]
        run_id = requested.stdout.strip().splitlines()[-1]
        assert re.fullmatch(r"rel-[0-9a-f]{32}", run_id), requested.stdout
        shown = subprocess.run(["ehr-release", "home", "--json"], cwd=root, env=env,
                               capture_output=True, text=True, timeout=120)
        prefect_ui = json.loads(shown.stdout)["prefect_ui"]
        assert prefect_ui and prefect_ui.startswith("http://127.0.0.1:"), shown.stdout

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(chromium_path),
                                        args=["--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_context(viewport=LAPTOP).new_page()
                _sign_in(page, url, "rita", creds["rita"])
                page.locator("#pending").get_by_role("link", name=run_id).click()
                expect(page.locator("#run-status")).to_have_text("awaiting approval")
                link = page.locator("#prefect-flow-run")
                expect(link).to_be_visible()  # found without PREFECT_UI_URL
                assert link.get_attribute("href").startswith(f"{prefect_ui}/runs/flow-run/")
                expect(page.locator("#risk .bar-row").first).to_be_visible()
                page.get_by_label("Reason (recorded in the audit trail)").fill(
                    "k^m verified; risk chart checked")
                # The decision publishes before the page answers (minutes on a busy machine).
                page.get_by_role("button", name="Approve and publish").click(timeout=600_000)
                expect(page.locator("#run-status")).to_have_text("published",
                                                                 timeout=300_000)
                expect(page.locator("#decision-notice")).to_contain_text(
                    "Decision recorded: approve by rita. The run is now published.")
            finally:
                browser.close()
        assert (root / "out" / "study12" / "releases" / run_id / "manifest.json").is_file()
    finally:
        os.killpg(block.pid, signal.SIGTERM)  # the dashboard this test started
        block.wait(timeout=30)
        log.close()
        subprocess.run(["ehr-release", "server", "stop"], cwd=root, env=env,
                       capture_output=True, timeout=120, check=False)


def _wait_for(url: str, block: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert block.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(f"{url}/login", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"the dashboard never answered; log:\n{log.read_text()[-3000:]}")
