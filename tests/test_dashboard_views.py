"""The dashboard's views ARX/Amnesia users expect (issue 34), in process (TestClient): the
risk view, the first rows of a release, the audit page's filters and pages, the Prefect UI
found as ``ehr-release home`` finds it, and the comparisons page with "release this row"."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ehr_release.dashboard.app import create_app
from ehr_release.model.reports import AttackReport, candidate_set_distribution
from ehr_release.storage import pending, runs
from ehr_release.storage.audit import export_events, record_event
from ehr_release.storage.engine import get_engine
from tests.test_dashboard import park, signed_in, text_of, text_of_table
from tests.test_storage import make_run, to_awaiting


@pytest.fixture
def world(ehr_home):
    """A run awaiting approval, a steward, a reviewer and an auditor (as test_dashboard's)."""
    from ehr_release.storage.users import add_user

    engine = get_engine()
    run = make_run(engine, requester="steward.sam")
    to_awaiting(run.id, engine)
    creds = {name: add_user(name, role) for name, role in
             [("steward.sam", "steward"), ("rita", "reviewer"), ("audrey", "auditor")]}
    return run.id, creds, [], create_app(publish=lambda run_id: runs.get_run(run_id).status)


# --------------------------------------------------------------------------- risk view
def test_candidate_set_distribution_bands_double_and_count_every_set() -> None:
    sizes = [1, 2, 3, 3, 4, 7, 8, 40]
    bands = candidate_set_distribution(sizes)
    assert [b[:2] for b in bands] == [[1, 1], [2, 3], [4, 7], [8, 15], [16, 31], [32, 63]]
    assert sum(b[2] for b in bands) == len(sizes)
    for low, high, count in bands:
        assert count == sum(low <= s <= high for s in sizes)
    assert candidate_set_distribution([]) == []


def test_a_failed_audit_keeps_no_distribution_in_its_stored_copy() -> None:
    kept = AttackReport("m", 3, True, 5, 3, True, candidate_set_sizes=[[4, 7, 3]])
    assert kept.stored().candidate_set_sizes == [[4, 7, 3]]
    failed = AttackReport("m", 3, True, 1, 3, False, candidate_set_sizes=[[1, 1, 1]])
    assert failed.stored().candidate_set_sizes == []


@pytest.mark.parametrize("m", [2, 3])  # m ≤ 2 and m > 2 take different paths
def test_the_disassociation_attack_records_its_distribution(m) -> None:
    """The real attack on a real release keeps the spread of what it measured."""
    import numpy as np

    from ehr_release import registry
    from ehr_release.release.verification import attack_release
    from ehr_release.samples.sample import generate_sample

    entry = registry.get("disassociation")
    dataset = generate_sample(200, seed=7)
    params = entry.parse({"k": "3", "m": str(m)})
    files = entry.anonymize(dataset, params, np.random.default_rng(7))
    report = attack_release(entry, files, dataset, params, "r1")
    assert report.passed and report.candidate_set_sizes
    lowest = report.candidate_set_sizes[0]
    assert lowest[0] <= report.smallest_candidate_set <= lowest[1] and lowest[2] > 0
    assert all(band[0] >= 2 for band in report.candidate_set_sizes)  # all ≥ k = 3
    assert report.stored().to_dict()["candidate_set_sizes"] == report.candidate_set_sizes


def _park_attack(run_id: str, attack: dict) -> None:
    park(run_id)
    row = pending.get_pending(run_id)
    outcome = json.loads(row.outcome_json)
    outcome["attack"] = {**outcome["attack"], **attack}
    row.outcome_json = json.dumps(outcome)
    pending.save_pending(pending.PendingRelease(**row.model_dump()))


def test_run_page_charts_the_candidate_set_sizes(world) -> None:
    run_id, creds, _, app = world
    _park_attack(run_id, {"threshold": 3, "smallest_candidate_set": 4,
                          "candidate_set_sizes": [[4, 7, 30], [8, 15, 10]]})
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    risk = text_of(page, "risk")
    assert "4–7 records 30 (75.0 %)" in risk and "8–15 records 10 (25.0 %)" in risk
    assert "40 distinct knowledge sets" in risk and "at least 3; smallest found 4" in risk
    assert re.findall(r'class="bar" style="display:block;width:([\d.]+)%"', page) == \
        ["100.0", "33.3"]


def test_a_band_below_k_is_marked_and_an_audit_without_sizes_says_why(world) -> None:
    run_id, creds, _, app = world
    _park_attack(run_id, {"threshold": 5, "candidate_set_sizes": [[2, 3, 1], [4, 7, 9],
                                                                   [8, 15, 2]]})
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    assert len(re.findall(r'class="bar-row below"', page)) == 1  # 2–3 < 5; 4–7 straddles
    _park_attack(run_id, {"candidate_set_sizes": []})
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    assert "recorded only its smallest candidate set" in text_of(page, "risk-none")


# --------------------------------------------------------------------------- released rows
def _park_files(run_id: str, folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    park(run_id)
    row = pending.get_pending(run_id)
    row.candidate_dir = str(folder)
    pending.save_pending(pending.PendingRelease(**row.model_dump()))
    runs.pin_candidate(run_id, {n: (hashlib.sha256(d).hexdigest(), len(d))
                                for n, d in files.items()})


def test_first_rows_come_from_the_pinned_candidate_bytes(world, tmp_path) -> None:
    run_id, creds, _, app = world
    rows = "".join(f"P{i:02d},{40 + i},[\"401.9\"]\n" for i in range(25))
    _park_files(run_id, tmp_path / "candidate", {
        "release.csv": ("pid,age,codes\n" + rows).encode(),
        "lines.jsonl": b'{"id": "a", "codes": ["1", "2"]}\n{"id": "b", "codes": []}\n',
        "meta.json": b'{"k": 3}'})
    client = signed_in(app, "rita", creds["rita"])
    page = client.get(f"/runs/{run_id}/rows").text
    assert "From the candidate awaiting your decision" in text_of(page, "rows-origin")
    csv_table = re.search(r'<table class="rows" data-file="release.csv">(.*?)</table>', page,
                          re.S).group(1)
    assert csv_table.count("<tr>") == 11  # header and 10 rows, of 25
    assert "P00" in csv_table and "P09" in csv_table and "P10" not in csv_table
    assert "25 rows; the first 10 shown" in page
    jsonl = re.search(r'data-file="lines.jsonl">(.*?)</table>', page, re.S).group(1)
    assert "<th>codes</th>" in jsonl and "[&#34;1&#34;,&#34;2&#34;]" in jsonl
    assert "metadata, not rows" in page
    assert "release.rows_viewed" in export_events(run_id, "jsonl")
    assert 'href="/runs/' + run_id + '/rows"' in client.get(f"/runs/{run_id}").text

    (tmp_path / "candidate" / "release.csv").write_text("pid,age,codes\nSWAPPED,1,x\n")
    page = client.get(f"/runs/{run_id}/rows").text
    assert "SWAPPED" not in page and "no longer matches the pinned release" in page


def test_released_rows_are_not_for_auditors_and_need_a_parked_release(world) -> None:
    run_id, creds, _, app = world
    assert signed_in(app, "audrey", creds["audrey"]).get(f"/runs/{run_id}/rows"
                                                         ).status_code == 403
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}/rows").text
    assert "not parked" in text_of(page, "rows-none")
    assert "release.rows_viewed" not in export_events(run_id, "jsonl")


# --------------------------------------------------------------------------- audit page
def test_audit_page_filters_by_type_run_actor_and_date_and_pages(world) -> None:
    run_id, creds, _, app = world
    for i in range(120):
        record_event(actor=f"user{i % 3}", action="certificate.downloaded",
                     run_id=run_id if i % 2 else None, payload={"i": i})
    client = signed_in(app, "audrey", creds["audrey"])

    def seqs(query: str) -> list[int]:
        table = text_of_table(client.get("/audit" + query).text, "audit")
        return [int(s) for s in re.findall(r"<tr><td>(\d+)</td>", table)]

    first, second = seqs(""), seqs("?page=2")
    assert len(first) == 50 and first == sorted(first, reverse=True)
    assert set(first).isdisjoint(second) and max(second) < min(first)
    page = client.get("/audit?actor=user1&page=1").text
    assert "40 events match the filter" in text_of(page, "audit-count")
    assert 'href="/audit?actor=user1&amp;page=2"' not in page  # 40 fit on one page
    table = text_of_table(page, "audit")
    assert table.count("<td>user1</td>") == 40 and "<td>user0</td>" not in table
    runs_only = text_of(client.get(f"/audit?run={run_id}&action=certificate.downloaded").text,
                        "audit-count")
    assert runs_only.startswith("60 events match")
    today = datetime.now(UTC).date()
    assert seqs(f"?since={today + timedelta(days=1)}") == []
    assert len(seqs(f"?since={today}&until={today}&actor=user2")) == 40
    assert client.get("/audit?since=yesterday").status_code == 400
    assert 'value="certificate.downloaded"' in client.get("/audit").text  # the type choices


# --------------------------------------------------------------------------- Prefect UI
class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()
        self.wfile.write(b"true")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def local_prefect_server(ehr_home):
    """A stand-in for this home's local Prefect server: it answers the health check and is
    recorded where ``ehr-release`` records the server it started."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ui = f"http://127.0.0.1:{server.server_address[1]}"
    ehr_home.mkdir(parents=True, exist_ok=True)
    (ehr_home / "prefect-server.json").write_text(json.dumps({"url": f"{ui}/api",
                                                              "pid": 1}))
    yield ui
    server.shutdown()


def test_the_prefect_ui_is_linked_where_ehr_release_home_finds_it(world, local_prefect_server,
                                                                  monkeypatch) -> None:
    from ehr_release.cli import app as cli

    run_id, creds, _, app = world
    monkeypatch.delenv("PREFECT_UI_URL", raising=False)
    flow_run = "0b6e6c1e-3a4f-4d4c-9a43-5f1f3c2a7e11"
    runs.set_flow_run_id(run_id, flow_run)
    shown = CliRunner().invoke(cli, ["home", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["prefect_ui"] == local_prefect_server
    page = signed_in(app, "rita", creds["rita"]).get(f"/runs/{run_id}").text
    assert f'href="{local_prefect_server}/runs/flow-run/{flow_run}"' in page


# --------------------------------------------------------------------------- comparisons
def _comparison(root: Path, fingerprint: str, *, recommended: int = 2) -> Path:
    """A comparison report as the comparison flow writes it (its rows are Outcome.to_dict)."""
    from ehr_release.comparison.compare import Candidate, Outcome

    outcomes = [Outcome(Candidate(1, "disassociation", {"k": "2", "m": "2"}), True, "ARE",
                        0.1, metrics={"ARE": 0.1}),
                Outcome(Candidate(2, "disassociation", {"k": "3", "m": "2"}), True, "ARE",
                        0.3, metrics={"ARE": 0.3}),
                Outcome(Candidate(3, "disassociation", {"k": "9", "m": "2"}), False, "ARE",
                        None, failures=["k^m"]),
                Outcome(Candidate(4, "diffgen", {"epsilon": "1"}, differentially_private=True),
                        True, "ARE", 0.777, metrics={"ARE": 0.777})]
    folder = root / "comparisons" / ("cmp-" + "a" * 32)
    folder.mkdir(parents=True)
    (folder / "comparison.json").write_text(json.dumps({
        "comparison_id": folder.name, "requester": "steward.sam",
        "dataset_fingerprint": fingerprint, "dataset_rows": 12, "requirements": ["k>=3"],
        "max_loss": None, "rows": [o.to_dict() for o in outcomes],
        "recommended_row": recommended, "reasons": ["row 1: k 2 < 3"]}))
    return folder


@pytest.fixture
def own_releases_root(tmp_path, monkeypatch) -> Path:
    """A releases root of this test's own (the suite's is the shared temp folder), set before
    the site records it."""
    root = tmp_path / "releases-root"
    root.mkdir()
    monkeypatch.setenv("EHR_RELEASE_RELEASES_ROOT", str(root))
    return root


@pytest.fixture
def compared(own_releases_root, test_site, tmp_path, monkeypatch):
    """A steward, a reviewer, an extract and a comparison of it under the releases root;
    the app's launcher records the requests it is given instead of starting a flow."""
    from ehr_release.planning.plan import make_plan
    from ehr_release.planning.request import ReleaseRequest
    from ehr_release.storage.destinations import releases_root
    from ehr_release.storage.users import add_user
    from tests.flow_helpers import CSV

    data = tmp_path / "extract.csv"
    data.write_text(CSV)
    probe = ReleaseRequest(run_id=runs.new_run_id(), input_path=str(data),
                           algorithm="disassociation", params={"k": "3", "m": "2"},
                           requester="x", out_dir=str(releases_root()))
    folder = _comparison(releases_root(), make_plan(probe).fingerprint)
    creds = {n: add_user(n, r) for n, r in [("steward.sam", "steward"), ("rita", "reviewer"),
                                            ("audrey", "auditor")]}
    launched: list = []
    return folder, data, creds, launched, create_app(launch=launched.append)


def test_comparisons_page_shows_the_frontier_and_the_recommended_row(compared) -> None:
    folder, _, creds, _, app = compared
    client = signed_in(app, "rita", creds["rita"])
    listing = text_of_table(client.get("/comparisons").text, "comparisons")
    assert folder.name in listing and "row 2" in listing
    page = client.get(f"/comparisons/{folder.name}").text
    assert "Row 2: disassociation (k=3, m=2)" in text_of(page, "recommended")
    src = re.search(r'<figure class="chart" id="frontier"><img src="data:image/png;base64,'
                    r'([^"]+)"', page).group(1)
    import base64

    assert base64.b64decode(src).startswith(b"\x89PNG")
    table = text_of(page, "candidates")
    assert "0.777" not in page and "in the report only" in table  # the ε-DP row's loss
    assert 'class="recommended" data-row="2"' in page
    assert "release this row" in page and 'id="release-form"' not in page  # reviewer
    assert signed_in(app, "audrey", creds["audrey"]).get("/comparisons").status_code == 403


def test_release_this_row_is_the_normal_governed_request(compared) -> None:
    folder, data, creds, launched, app = compared
    client = signed_in(app, "steward.sam", creds["steward.sam"])
    page = client.get(f"/comparisons/{folder.name}?row=1").text
    assert re.search(r'<option value="1" selected>', page)
    assert '<option value="3"' not in page and '<option value="4"' not in page
    token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    done = client.post(f"/comparisons/{folder.name}/release",
                       data={"csrf": token, "row": "2", "input_path": str(data),
                             "recipient": "Cardiology study group"})
    assert done.status_code == 303
    (request,) = launched
    assert done.headers["location"] == f"/runs/{request.run_id}"
    assert (request.algorithm, request.params) == ("disassociation", {"k": "3", "m": "2"})
    assert (request.comparison_id, request.comparison_row) == (folder.name, 2)
    assert request.requester == "steward.sam" and request.recipient == "Cardiology study group"
    run = runs.get_run(request.run_id)
    assert run.status == "requested" and run.requester == "steward.sam"
    assert "run.requested" in export_events(request.run_id, "jsonl")


def test_release_this_row_refuses_what_the_cli_refuses(compared, tmp_path) -> None:
    folder, data, creds, launched, app = compared
    client = signed_in(app, "steward.sam", creds["steward.sam"])
    token = re.search(r'name="csrf" value="([^"]+)"',
                      client.get(f"/comparisons/{folder.name}").text).group(1)
    other = tmp_path / "other.csv"
    other.write_text(data.read_text().replace("401.9", "402.0"))
    for row, path, why in [(3, data, "did not verify"), (4, data, "differentially private"),
                           (2, other, "not the dataset the comparison was run on")]:
        page = client.post(f"/comparisons/{folder.name}/release",
                           data={"csrf": token, "row": str(row), "input_path": str(path)})
        assert page.status_code == 400, why
        assert why in text_of(page.text, "release-error")
    assert launched == []
    assert export_events(None, "jsonl").count("ingest.rejected") == 3
    reviewer = signed_in(app, "rita", creds["rita"])
    token = re.search(r'name="csrf" value="([^"]+)"',
                      reviewer.get(f"/comparisons/{folder.name}").text).group(1)
    refused = reviewer.post(f"/comparisons/{folder.name}/release",
                            data={"csrf": token, "row": "2", "input_path": str(data)})
    assert refused.status_code == 403 and launched == []
