"""Issue 32 item 5: test mode cannot publish.

Before, ``EHR_RELEASE_TEST_MODE=1`` — an environment variable any steward can set — let a
seeded (replayable) release through the approval gate on any site. Now a seed is accepted
only on a site made as a test site, which its audit chain's first event records; elsewhere
the request is refused, and a test site's certificate and datasheet say so on page 1.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from sqlmodel import Session, select
from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.core.errors import EhrReleaseError, ParameterError
from ehr_release.storage.audit import export_events, record_event, verify_chain
from ehr_release.storage.engine import get_engine
from ehr_release.storage.models import AuditEvent
from ehr_release.storage.site import create_site, is_test_site
from tests.flow_helpers import CSV, request_for, run_approved

runner = CliRunner()


def _seeded(tmp_path: Path):
    data = tmp_path / "extract.csv"
    data.write_text(CSV)
    return request_for(data, tmp_path / "out", algorithm="disassociation").model_copy(
        update={"params": {"k": "3", "m": "2", "seed": "7"}})


def test_a_normal_site_refuses_a_seed_even_in_test_mode(ehr_home, tmp_path, monkeypatch):
    """The variable alone no longer opens the gate: refused at request, audited, no run."""
    from ehr_release import service
    from ehr_release.storage import runs

    monkeypatch.setenv("EHR_RELEASE_TEST_MODE", "1")
    request = _seeded(tmp_path)
    with pytest.raises(ParameterError, match="only accepted on a test site") as refused:
        service.precheck(request, register=True)
    assert "\n" not in str(refused.value)
    with pytest.raises(EhrReleaseError):
        runs.get_run(request.run_id)  # nothing registered
    events = [json.loads(x) for x in export_events(None, "jsonl").splitlines()]
    assert [e["action"] for e in events] == ["ingest.rejected"]
    assert "test site" in events[0]["payload"]["error"]


def test_the_flow_refuses_a_seed_on_a_normal_site_too(ehr_home, tmp_path, monkeypatch):
    """The ingest stage makes the plan again and trusts no caller."""
    from ehr_release.planning.plan import make_plan

    monkeypatch.setenv("EHR_RELEASE_TEST_MODE", "1")
    with pytest.raises(ParameterError, match="test site"):
        make_plan(_seeded(tmp_path))


def test_the_cli_refuses_a_seed_on_a_normal_site_with_one_line(ehr_home, tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("EHR_RELEASE_TEST_MODE", "1")
    request = _seeded(tmp_path)
    result = runner.invoke(app, ["run", "--input", request.input_path, "--algorithm",
                                 "disassociation", "--param", "k=3", "--param", "m=2",
                                 "--param", "seed=7", "--requester", "steward.sam",
                                 "--out", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "only accepted on a test site" in errors[0], result.output


def test_a_test_site_accepts_the_seed(test_site, tmp_path, monkeypatch):
    from ehr_release.planning.plan import make_plan

    monkeypatch.setenv("EHR_RELEASE_TEST_MODE", "1")
    assert make_plan(_seeded(tmp_path)).params["seed"] == 7


def test_a_site_in_use_cannot_become_a_test_site(ehr_home):
    record_event(actor="steward", action="run.requested")
    with pytest.raises(EhrReleaseError, match="already exists"):
        create_site(test=True)
    assert not is_test_site()
    result = runner.invoke(app, ["site", "init", "--test"])
    assert result.exit_code == 1 and "already exists (a normal site" in result.output
    assert runner.invoke(app, ["site", "status"]).output.strip() == "normal site"


def test_site_init_makes_a_test_site_once(ehr_home):
    assert runner.invoke(app, ["site", "status"]).output.strip() == "normal site"
    made = runner.invoke(app, ["site", "init", "--test"])
    assert made.exit_code == 0 and made.output.strip() == "test site created"
    assert runner.invoke(app, ["site", "status"]).output.strip() == "test site"
    again = runner.invoke(app, ["site", "init"])
    assert again.exit_code == 1 and "already exists (a test site" in again.output
    assert is_test_site() and verify_chain().ok


def test_a_normal_site_made_explicitly_stays_normal(ehr_home):
    create_site(test=False)
    assert not is_test_site()


def test_a_flag_edited_in_the_database_does_not_make_a_test_site(ehr_home):
    """The flag is the chain's authenticated first event: a row edited to say test_site
    fails its HMAC and the site reads as a normal one (seeds refused)."""
    create_site(test=False)
    with Session(get_engine()) as s:
        first = s.exec(select(AuditEvent).where(AuditEvent.seq == 1)).one()
        first.payload_json = '{"test_site":true}'
        s.add(first)
        s.commit()
    assert not is_test_site()
    assert not verify_chain().ok


def _page_one(pdf: Path) -> str:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) not installed; .ci/run installs it")
    return subprocess.run(["pdftotext", "-f", "1", "-l", "1", str(pdf), "-"],
                          capture_output=True, text=True, check=True).stdout


def test_a_test_sites_published_documents_say_so_on_page_one(env):
    """A seeded release published on a test site: the certificate filed under the home and
    the datasheet that goes with the data both say TEST SITE on their first page."""
    from ehr_release.storage.engine import home
    from ehr_release.tasks.publish import CERTIFICATE

    data, out = env
    req = request_for(data, out).model_copy(update={"params": {"k": "3", "seed": "7"}})
    assert run_approved(req).get("result") == "published"
    assert "TEST SITE" in _page_one(home() / "runs" / req.run_id / CERTIFICATE)
    assert "TEST SITE" in _page_one(out / "releases" / req.run_id / "datasheet.pdf")


def test_a_seeded_run_parked_on_a_normal_site_is_not_published(ehr_home):
    """Defence in depth: a seeded run approved on a normal site (parked before the rule,
    say) is refused at publishing too."""
    from ehr_release.storage import runs
    from ehr_release.storage.models import DatasetRecord
    from ehr_release.tasks.publish import publish_release
    from tests.test_storage import to_awaiting

    engine = get_engine()
    ds = DatasetRecord(fingerprint="ab" * 32, rows=10, codes=30, columns_json="{}", source="x")
    run_id = runs.new_run_id()
    runs.create_run(run_id=run_id, dataset=ds, requester="steward", algorithm="code-counts",
                    parameters={"k": "2", "seed": "7"}, out_dir="/tmp", engine=engine)
    to_awaiting(run_id, engine)
    runs.decide(run_id, reviewer="rita", decision="approve", reason="ok", engine=engine)
    with pytest.raises(ParameterError, match="only accepted on a test site"):
        publish_release(run_id, {}, None, None, "flow")  # type: ignore[arg-type]
