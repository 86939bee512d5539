"""The command line: exit codes and one-line messages (CliRunner, in process)."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session, text
from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.storage.audit import export_events, record_event
from ehr_release.storage.engine import get_engine
from tests import doubles

runner = CliRunner()

CSV = "patient_id,age,codes\n" + "".join(f"S{i},{40 + i},401.9 250.00\n" for i in range(6))


@pytest.fixture
def cli_env(ehr_home, monkeypatch, tmp_path):
    doubles.install(monkeypatch)
    data = tmp_path / "extract.csv"
    data.write_text(CSV)
    return data


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and "ehr-release" in result.output


def test_algorithms_lists_registered(cli_env):
    result = runner.invoke(app, ["algorithms"])
    assert result.exit_code == 0
    assert "code-counts" in result.output


def test_status_of_unknown_run(cli_env):
    result = runner.invoke(app, ["status", "rel-" + "0" * 32])
    assert result.exit_code == 1
    assert "no release run with id" in result.output


def test_run_rejects_bad_input_with_audit_event(cli_env, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("patient_id,codes\nA,401.9\nB,999.999\n")
    result = runner.invoke(app, ["run", "--input", str(bad), "--algorithm", "code-counts",
                                 "--param", "k=2", "--requester", "steward", "--out",
                                 str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "row 2" in result.output and "999.999" in result.output
    events = [e for e in map(json.loads, export_events(None, "jsonl").splitlines())
              if e["action"] != "site.setting_set"]  # the site's settings, first use
    assert [e["action"] for e in events] == ["ingest.rejected"]
    assert not (tmp_path / "out").exists()


def test_run_rejects_bad_parameter(cli_env, tmp_path):
    result = runner.invoke(app, ["run", "--input", str(cli_env), "--algorithm", "code-counts",
                                 "--param", "k=zero", "--requester", "steward", "--out",
                                 str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "k must be a whole number, got 'zero'" in result.output


def test_run_refuses_self_approval(cli_env, tmp_path):
    result = runner.invoke(app, ["run", "--input", str(cli_env), "--algorithm", "code-counts",
                                 "--param", "k=2", "--requester", "alice", "--out",
                                 str(tmp_path / "out"), "--approve-as", "Alice", "--reason",
                                 "mine"])
    assert result.exit_code == 1
    assert "may not approve" in result.output
    assert "approval.refused" in export_events(None, "jsonl")


def test_verify_command_exit_codes(cli_env, tmp_path):
    from ehr_release.ingest import read_dataset

    dataset = read_dataset(cli_env)
    good = tmp_path / "counts.json"
    good.write_bytes(doubles.CODE_COUNTS.anonymize(dataset, {"k": 6}, None)["counts.json"])
    args = ["verify", "--algorithm", "code-counts", "--release", str(good), "--original",
            str(cli_env)]
    ok = runner.invoke(app, [*args, "--param", "k=6"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["holds"] is True
    bad = runner.invoke(app, [*args, "--param", "k=7"])
    assert bad.exit_code == 1
    report = json.loads(bad.stdout)
    assert report["holds"] is False
    model = [r for r in report["requirements"] if r["name"] != "closed world"]
    assert model[0]["measured"] == "smallest count 6"


def test_audit_verify_and_export(cli_env):
    for i in range(3):
        record_event(actor="t", action="x", payload={"i": i})
    ok = runner.invoke(app, ["audit", "verify"])
    assert ok.exit_code == 0 and "3 events" in ok.output
    csv_out = runner.invoke(app, ["audit", "export", "--format", "csv"])
    assert csv_out.exit_code == 0 and len(csv_out.stdout.splitlines()) == 4
    assert runner.invoke(app, ["audit", "export", "--format", "xml"]).exit_code == 1
    with Session(get_engine()) as s:
        s.exec(text("UPDATE audit_events SET action = 'y' WHERE seq = 2"))
        s.commit()
    broken = runner.invoke(app, ["audit", "verify"])
    assert broken.exit_code == 1
    assert "event 2" in broken.output


@pytest.mark.parametrize(("args", "message"), [
    (["--out", "{tmp}/sample.txt"], "parameter '--out' must end in .csv or .parquet; got "
                                    "'{tmp}/sample.txt'"),
    (["--out", "{tmp}/sample.csv", "--patients", "0"],
     "parameter '--patients' must be a positive integer; got 0"),
    (["--out", "{tmp}/folder.csv"], "file {tmp}/folder.csv: cannot be written"),
    (["--out", "{tmp}/missing/sample.csv"], "file {tmp}/missing/sample.csv: cannot be written"),
])
def test_generate_sample_refuses_bad_options_in_one_line(tmp_path, args, message):
    """Bad options are the user's mistake: one line naming the option, no traceback."""
    (tmp_path / "folder.csv").mkdir()
    result = runner.invoke(app, ["generate-sample", *[a.format(tmp=tmp_path) for a in args]])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {message.format(tmp=tmp_path)}")
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "sample.txt").exists()


def test_reconstruct_names_the_file_it_was_given_when_it_is_not_a_release(tmp_path):
    not_a_release = tmp_path / "extract.csv"
    not_a_release.write_text(CSV)
    result = runner.invoke(app, ["reconstruct", "--release", str(not_a_release),
                                 "--out", str(tmp_path / "r.csv")])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: file {not_a_release}: not a disassociation "
                                    "release")
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.parametrize(("params", "message"), [
    (["--param", "k"], "parameter '--param' must look like NAME=VALUE; got 'k'"),
    (["--param", "k=2", "--param", "k=3"], "parameter 'k' is given more than once"),
])
def test_run_audits_a_malformed_param_like_any_refused_request(cli_env, tmp_path, params,
                                                               message):
    result = runner.invoke(app, ["run", "--input", str(cli_env), "--algorithm", "code-counts",
                                 *params, "--requester", "steward", "--out",
                                 str(tmp_path / "out")])
    assert result.exit_code == 1 and result.output.startswith(f"error: {message}")
    events = [e for e in map(json.loads, export_events(None, "jsonl").splitlines())
              if e["action"] != "site.setting_set"]  # the site's settings, first use
    assert [e["action"] for e in events] == ["ingest.rejected"]
    assert events[0]["payload"]["error"].startswith(message)


@pytest.mark.parametrize("args", [
    ["--algorithm", "code-countz", "--param", "k=2"],  # a typo in the algorithm's name
    ["--algorithm", "code-counts", "--param", "k=zero"],
    ["--algorithm", "code-counts", "--param-grid", "k=2,zero"],
])
def test_compare_audits_a_refused_request_like_run(cli_env, tmp_path, args):
    result = runner.invoke(app, ["compare", "--input", str(cli_env), *args, "--requester",
                                 "steward", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and result.output.startswith("error: ")
    events = [e for e in map(json.loads, export_events(None, "jsonl").splitlines())
              if e["action"] != "site.setting_set"]  # the site's settings, first use
    assert [e["action"] for e in events] == ["ingest.rejected"]
    assert events[0]["payload"]["request"].startswith("cmp-")
    assert not (tmp_path / "out" / "comparisons").exists()
