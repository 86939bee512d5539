"""The command line as its users meet it (issue 16): one home, a quick first answer,
progress, readable `algorithms`, task runs named by what they ran.

The slow half (a real Prefect server, its UI and logs) is in ``test_local_server.py``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.comparison.compare import Candidate, Outcome
from ehr_release.storage.runs import Status

runner = CliRunner()

BAD_CSV = "patient_id,codes\nA,401.9\nB,999.999\n"

# Runs the CLI in a fresh interpreter and reports which Prefect modules it imported, so a
# refusal that happened after Prefect's start-up (the ~10 s of issue 16) is caught.
DRIVER = """
import json, sys
from typer.testing import CliRunner
from ehr_release.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
print(json.dumps({"exit": result.exit_code, "output": result.output,
                  "prefect": sorted(m for m in sys.modules if m.split(".")[0] == "prefect")}))
"""


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "EHR_RELEASE_DATABASE"))}
    env.update(EHR_RELEASE_HOME=str(home), EHR_RELEASE_TEST_MODE="1",
               EHR_RELEASE_RELEASES_ROOT=str(home.parent))
    return env


def _drive(tmp_path: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", DRIVER, *args], capture_output=True,
                          text=True, env=_clean_env(tmp_path / "home"), cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ first answer, fast
@pytest.mark.parametrize("case", ["run-bad-file", "run-bad-param", "compare-bad-file",
                                  "run-bad-comparison-row"])
def test_bad_input_is_refused_before_prefect_is_imported(tmp_path: Path, case: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_CSV)
    good = tmp_path / "good.csv"
    good.write_text("patient_id,codes\nA,401.9\nB,250.00\n")
    run = ["run", "--requester", "steward", "--out", str(tmp_path)]
    args, message = {
        "run-bad-file": ([*run, "--input", str(bad), "--algorithm", "disassociation",
                          "--param", "k=5"], "row 2"),
        "run-bad-param": ([*run, "--input", str(good), "--algorithm", "disassociation",
                           "--param", "k=1"], "k"),
        "compare-bad-file": (["compare", "--input", str(bad), "--requester", "steward",
                              "--out", str(tmp_path), "--algorithm", "disassociation",
                              "--param-grid", "k=2,3"], "row 2"),
        "run-bad-comparison-row": ([*run, "--input", str(good), "--from-comparison",
                                    str(tmp_path), "--row", "0"], "cannot read comparison"),
    }[case]
    result = _drive(tmp_path, *args)
    assert result["exit"] == 1 and message in result["output"], result
    assert result["prefect"] == [], "refused only after importing Prefect"
    assert not (tmp_path / "home" / "prefect-server.json").exists()  # no server started


@pytest.mark.parametrize("case", ["bad-param", "bad-file", "missing-file"])
def test_bad_input_is_answered_before_the_database_is_used(tmp_path: Path, case: str) -> None:
    """The refusal is the first line even when the database is down: it is shown before
    SQLAlchemy is imported (identity, audit), and the database's failure comes after it."""
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_CSV)
    good = tmp_path / "good.csv"
    good.write_text("patient_id,codes\nA,401.9\nB,250.00\n")
    given, expected = {"bad-param": ((good, "k=0"), "error: parameter 'k'"),
                       "bad-file": ((bad, "k=5"), "row 2, column 'codes'"),
                       "missing-file": ((tmp_path / "no.csv", "k=5"), "does not exist")}[case]
    env = {**_clean_env(tmp_path / "home"),
           "EHR_RELEASE_DATABASE_URL": "postgresql+psycopg://bob@127.0.0.1:1/down"}
    done = subprocess.run(
        [sys.executable, "-m", "ehr_release.cli", "run", "--input", str(given[0]), "--param",
         given[1], "--algorithm", "disassociation", "--requester", "steward"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 2, done.stderr
    assert lines[0].startswith("error: ") and expected in lines[0], done.stderr
    assert "cannot use the database" in lines[1], done.stderr


def test_a_fast_refusal_is_audited_under_the_requester(ehr_home: Path, tmp_path: Path) -> None:
    from ehr_release.storage.audit import export_events

    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_CSV)
    result = runner.invoke(app, ["run", "--input", str(bad), "--algorithm", "disassociation",
                                 "--param", "k=5", "--requester", "steward.sam"])
    assert result.exit_code == 1 and "row 2" in result.output
    events = [e for e in map(json.loads, export_events(None, "jsonl").splitlines())
              if e["action"] != "site.setting_set"]  # the site's settings, first use
    assert [(e["action"], e["actor"]) for e in events] == [("ingest.rejected", "steward.sam")]
    assert events[0]["payload"]["input"] == str(bad)
    assert events[0]["payload"]["request"].startswith("rel-")
    assert "999.999" not in json.dumps(events)


def test_a_refused_comparison_input_is_audited(ehr_home: Path, tmp_path: Path) -> None:
    from ehr_release.storage.audit import export_events

    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_CSV)
    result = runner.invoke(app, ["compare", "--input", str(bad), "--requester", "steward",
                                 "--out", str(tmp_path), "--algorithm", "disassociation",
                                 "--param-grid", "k=2,3"])
    assert result.exit_code == 1
    events = [e for e in map(json.loads, export_events(None, "jsonl").splitlines())
              if e["action"] != "site.setting_set"]  # the site's settings, first use
    assert [e["action"] for e in events] == ["ingest.rejected"]
    assert "999.999" not in json.dumps(events)  # no patient value in the audit payload


# ------------------------------------------------------------------------- one home
def test_default_home_is_per_user_not_per_folder(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from ehr_release.storage.destinations import releases_root
    from ehr_release.storage.engine import database_url, home

    monkeypatch.delenv("EHR_RELEASE_HOME", raising=False)
    monkeypatch.delenv("EHR_RELEASE_DATABASE_URL", raising=False)
    monkeypatch.delenv("EHR_RELEASE_RELEASES_ROOT", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    homes = set()
    for folder in ("example-a", "example-b"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        homes.add(home())
    assert homes == {tmp_path / "data" / "ehr-release"}
    assert database_url() == f"sqlite:///{tmp_path / 'data' / 'ehr-release' / 'ehr_release.db'}"
    assert releases_root() == tmp_path / "data" / "ehr-release" / "releases"
    assert not (tmp_path / "example-a" / ".ehr_release").exists()
    monkeypatch.setenv("EHR_RELEASE_HOME", str(tmp_path / "mine"))
    assert home() == tmp_path / "mine"  # the variable still wins


def test_home_command_says_where_everything_is(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EHR_RELEASE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("EHR_RELEASE_RELEASES_ROOT", raising=False)
    monkeypatch.setenv("EHR_RELEASE_DATABASE_URL",
                       "postgresql+psycopg://steward:s3cret@db.example:5432/ehr")
    result = runner.invoke(app, ["home", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["home"] == str(tmp_path / "home")
    assert info["database"] == "postgresql+psycopg://steward:***@db.example:5432/ehr"
    assert info["releases_root"] == str(tmp_path / "home" / "releases")
    assert info["prefect_api"] is None
    assert "s3cret" not in runner.invoke(app, ["home"]).output


# ------------------------------------------------------------------------ algorithms
def test_algorithms_shows_required_defaults_and_allowed_values() -> None:
    from ehr_release import registry
    from ehr_release.parameters.params import REQUIRED

    result = runner.invoke(app, ["algorithms"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert sum(line.split() == ["PARAMETER", "REQUIRED", "DEFAULT", "ALLOWED"]
               for line in lines) == len(registry.names())
    rows = {tuple(line.split()[:3]) for line in lines}
    for name in registry.names():
        for p in registry.get(name).params:
            if p.default is REQUIRED:
                assert (p.name, "yes", "-") in rows, (name, p.name)
            elif p.default not in (None, ""):
                assert (p.name, "no", str(p.default)) in rows, (name, p.name)
    out = result.output
    assert "an integer ≥ 2" in out  # disassociation's k rule, without "must be"
    assert "one of max, infogain" in out  # diffgen's score choices
    assert "test mode only" in out  # a seed says it is refused in production


# -------------------------------------------------------------------------- progress
class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_stage_progress_prints_each_stage_with_its_time(capsys) -> None:
    from ehr_release.cli_support.progress import StageProgress

    clock = FakeClock()
    shown = StageProgress("rel-1", records=10_000, live=False, clock=clock)
    clock.now = 100.4
    shown(Status.REQUESTED)
    with shown.step("Prefect server"):
        clock.now = 103.0
    clock.now = 110.0
    shown(Status.ANONYMIZED)
    clock.now = 112.5
    shown(Status.EVALUATED)  # verified was missed between two polls
    shown(Status.EVALUATED)  # seen again: nothing new
    clock.now = 113.0
    shown(Status.FAILED)
    err = capsys.readouterr()
    assert err.out == ""  # stdout is for the run id only
    lines = err.err.splitlines()
    assert lines[0] == "run rel-1"
    assert lines[1].split() == ["ok", "ingest", "(10,000", "records)", "0.4", "s", "(total",
                                "0.4", "s)"]
    assert lines[2].split() == ["ok", "Prefect", "server", "2.6", "s"]
    assert lines[3].split()[:4] == ["ok", "anonymize", "7.0", "s"]
    assert lines[4].split()[:8] == ["ok", "verify", "+", "attack", "audit,", "evaluate",
                                    "utility", "2.5"]
    assert lines[5].split() == ["!!", "failed", "after", "13.0", "s"]
    assert len(lines) == 6


def test_resumed_run_lists_earlier_stages_as_done_before(capsys) -> None:
    """``resume`` shows what finished before it started, then times only what it runs."""
    from ehr_release.cli_support.progress import StageProgress

    clock = FakeClock()
    shown = StageProgress("rel-2", live=False, clock=clock)
    clock.now = 100.5
    shown.resumed_from(Status.VERIFIED)
    clock.now = 104.5
    shown(Status.VERIFIED)  # the resumed flow reports where it stands: nothing new
    shown(Status.EVALUATED)
    lines = capsys.readouterr().err.splitlines()
    assert lines[1].split() == ["ok", "ingest,", "anonymize,", "verify", "+", "attack",
                                "audit", "(done", "before)"]
    assert lines[2].split()[:5] == ["ok", "evaluate", "utility", "4.0", "s"]
    assert len(lines) == 3


def test_wait_for_status_reports_every_status_once(monkeypatch) -> None:
    from ehr_release import service

    seen = iter(["requested", "requested", "anonymized", "verified", "verified",
                 "awaiting_approval"])
    monkeypatch.setattr(service.runs, "get_run",
                        lambda _id, _engine=None: SimpleNamespace(status=next(seen)))
    monkeypatch.setattr(service, "get_reader", lambda: None)
    monkeypatch.setattr(service.time, "sleep", lambda _s: None)
    calls: list[Status] = []
    final = service.wait_for_status("rel-1", service.SETTLED, timeout_s=60,
                                    on_status=calls.append)
    assert final == Status.AWAITING_APPROVAL
    assert calls == [Status.REQUESTED, Status.ANONYMIZED, Status.VERIFIED,
                     Status.AWAITING_APPROVAL]


def test_compare_progress_prints_each_row_as_it_finishes(capsys) -> None:
    from ehr_release.cli_support.progress import CompareProgress

    clock = FakeClock()
    shown = CompareProgress(2, live=False, clock=clock)
    clock.now = 104.0
    shown(Outcome(Candidate(1, "disassociation", {"k": "10", "m": "2"}), True,
                  "ARE W2", 0.1234567), 1, 2)
    clock.now = 109.0
    shown(Outcome(Candidate(0, "lda", {"k": "5"}), False, "AvgRE", None,
                  failures=["k: 3"]), 2, 2)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "comparing 2 candidates"
    assert lines[1].split() == ["DONE", "ROW:", "CANDIDATE", "VERIFIED", "LOSS", "TIME"]
    # the row number is the report's (issue 34: one numbering for comparison rows)
    assert lines[2].split() == ["1/2", "1:", "disassociation", "(k=10,", "m=2)", "yes", "ARE",
                                "W2", "0.1235", "4.0s"]
    assert lines[3].split() == ["2/2", "0:", "lda", "(k=5)", "no", "-", "9.0s"]


def test_live_progress_goes_to_stderr_only(monkeypatch) -> None:
    """On a terminal the Rich display is used; it still never writes to stdout."""
    from rich.console import Console

    from ehr_release.cli_support import progress

    err, out = io.StringIO(), io.StringIO()
    monkeypatch.setattr(progress, "_stderr_console",
                        lambda: Console(file=err, force_terminal=True, width=100))
    monkeypatch.setattr(sys, "stdout", out)
    with progress.StageProgress("rel-2", records=3) as shown:
        assert shown.live
        shown(Status.REQUESTED)
        shown(Status.AWAITING_APPROVAL)
    assert out.getvalue() == ""
    assert "ingest (3 records)" in err.getvalue() and "park for review" in err.getvalue()


# ------------------------------------------------------------------ Prefect names, logs
def test_task_runs_are_named_by_algorithm_and_parameters() -> None:
    from prefect._internal.engine import resolve_custom_task_run_name

    from ehr_release.flows.compare import candidate_task
    from ehr_release.tasks.algorithm_stages import (
        anonymize_task,
        attack_task,
        evaluate_task,
        verify_task,
    )
    from ehr_release.tasks.status import advance_task

    request = SimpleNamespace(params={"m": "2", "k": "5"})
    given = {"plan": SimpleNamespace(algorithm="disassociation", request=request)}
    for task, stage in [(anonymize_task, "anonymize"), (verify_task, "verify"),
                        (attack_task, "attack"), (evaluate_task, "evaluate")]:
        assert task.name == stage  # unchanged: the name is part of the cache key
        assert resolve_custom_task_run_name(task, given) == f"{stage}[disassociation k=5 m=2]"
    candidate = Candidate(65, "lda", {"k": "5", "w_icd": "0.3"})
    assert (resolve_custom_task_run_name(candidate_task, {"candidate": candidate})
            == "candidate[65: lda k=5 w_icd=0.3]")
    assert (resolve_custom_task_run_name(advance_task, {"to": Status.VERIFIED})
            == "advance[verified]")


def test_prefect_is_configured_to_keep_flow_logs_at_info(tmp_path: Path) -> None:
    """The API handler gets INFO (the UI shows the flow's logs); the console only warnings."""
    script = ("from ehr_release.flows.server import configure_prefect_home\n"
              "configure_prefect_home()\n"
              "import logging\n"
              "from prefect.logging.configuration import setup_logging\n"
              "setup_logging()\n"
              "console = [h for h in logging.getLogger().handlers\n"
              "           if type(h).__name__ == 'PrefectConsoleHandler']\n"
              "print(logging.getLogger('prefect.flow_runs').getEffectiveLevel(),\n"
              "      logging.getLogger('prefect.task_runs').getEffectiveLevel(),\n"
              "      console[0].level)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=_clean_env(tmp_path / "home"), timeout=120)
    assert done.returncode == 0, done.stderr
    flow_level, task_level, console_level = map(int, done.stdout.split())
    assert (flow_level, task_level, console_level) == (20, 20, 30)
