"""The history people see: `ehr-release history` and the dashboard's history page."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.dashboard.app import create_app
from ehr_release.history.view import source_history
from ehr_release.samples.sample import generate_sample
from ehr_release.storage import site_policy
from ehr_release.storage.users import add_user
from tests.test_dashboard import signed_in
from tests.test_history_checks import _minus, _park

RUNNER = CliRunner()


def _two_releases():
    extract = generate_sample(60, seed=3)
    first = _park("disassociation", extract, {"k": "5", "m": "2"})
    second = _park("disassociation", _minus(extract, 10), {"k": "5", "m": "2"})
    return extract, first, second


def test_the_history_shows_releases_overlap_epsilon_and_what_binds(ehr_home):
    extract, first, second = _two_releases()
    [h] = source_history("default")
    assert [r.run_id for r in h.releases] == [first, second]
    assert h.overlaps == [(second, first, 50, 0, 10)]
    assert h.patients == extract.n_patients and h.epsilon_max == "0"
    assert any("k^m-anonymity k=5 m=2" in rule for rule in h.binding)
    assert any("ε ≤ 3 left" in rule for rule in h.binding)


def test_the_history_command_prints_it_and_json(ehr_home):
    _, first, second = _two_releases()
    shown = RUNNER.invoke(app, ["history"])
    assert shown.exit_code == 0, shown.output
    assert first in shown.output and "50 shared, 0 only in the later, 10 only in the earlier" \
        in shown.output and "binds the next release" in shown.output
    data = json.loads(RUNNER.invoke(app, ["history", "default", "--json"]).output)
    assert data[0]["source"] == "default" and len(data[0]["releases"]) == 2
    unknown = RUNNER.invoke(app, ["history", "ward-q"])
    assert unknown.exit_code == 2 and "not registered" in unknown.output


def test_policy_and_source_commands_are_audited_changes(ehr_home):
    assert RUNNER.invoke(app, ["source", "add", "ward-b", "--by", "admin"]).exit_code == 0
    assert "ward-b" in RUNNER.invoke(app, ["source", "list"]).output
    done = RUNNER.invoke(app, ["policy", "epsilon-total", "2", "--by", "po", "--reason", "IRB"])
    assert done.exit_code == 0 and site_policy.epsilon_total() == 2
    refused = RUNNER.invoke(app, ["policy", "epsilon-total", "0", "--by", "po", "--reason", "x"])
    assert refused.exit_code == 2 and "positive number" in refused.output
    RUNNER.invoke(app, ["policy", "weaker-releases", "allow", "--by", "po", "--reason", "r"])
    assert site_policy.weaker_policy().allowed


def test_the_dashboard_history_page(ehr_home):
    _, first, _ = _two_releases()
    credential = add_user("rita", "reviewer")
    client = signed_in(create_app(publish=lambda run_id: None), "rita", credential)
    page = client.get("/history")
    assert page.status_code == 200 and first in page.text
    assert "What binds the next release" in page.text and "Overlapping releases" in page.text
    assert client.get("/history?source=nope").status_code == 404
