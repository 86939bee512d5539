"""``status``, ``list`` and run-id prefixes read without SQLAlchemy (issue 37 goal 3) say
exactly what the full path says, and give way to it whenever they cannot.

Each case runs the command twice in process: once with the full path taken away (the
quick one must answer: the service and the ORM raise if asked) and once with the quick path
taken away; stdout, stderr and the exit code must be the same bytes. The runs cover every
state a person may see. A subprocess then shows what the quick path imports, and the
overdue-window cases show the full path still writes the rejection.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import Session, text
from typer.testing import CliRunner

from ehr_release import service
from ehr_release.cli import app
from ehr_release.cli_support import quick_read, run_ids
from ehr_release.storage import pending, runs, sqlite_read
from ehr_release.storage.audit import export_events
from ehr_release.storage.engine import get_engine, reset_engines
from ehr_release.storage.models import DatasetRecord, PendingRelease, RunLease, utc_now
from ehr_release.storage.runs import Status
from tests.test_cli_start import HEAVY, SRC
from tests.test_storage import to_awaiting

runner = CliRunner()


def _run() -> str:
    """A run of a registered algorithm (``status`` shows its effective parameters: the
    registry looks up just that one, as for a real run)."""
    ds = DatasetRecord(fingerprint="ab" * 32, rows=10, codes=30, columns_json="{}", source="x")
    return runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester="steward",
                           algorithm="disassociation", parameters={"k": "5", "m": "2"},
                           out_dir="/tmp").id


def _window(run_id: str, expires_at: str) -> None:
    pending.save_pending(PendingRelease(run_id=run_id, candidate_dir="x", verification_json="{}",
                                        utility_json="{}", outcome_json="{}",
                                        data_use_json="{}", expires_at=expires_at))


def _lease(run_id: str, host: str, pid: int, renewed_at: str) -> None:
    with Session(get_engine()) as s:
        s.add(RunLease(run_id=run_id, holder="test", host=host, pid=pid,
                       renewed_at=renewed_at))
        s.commit()


def _sql(statement: str, **params: object) -> None:
    with Session(get_engine()) as s:
        s.exec(text(statement).bindparams(**params))
        s.commit()


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


@pytest.fixture
def many_runs(ehr_home: Path) -> dict[str, str]:
    """name → run id, one run per state a person may see."""
    return _make_many_runs()


def _make_many_runs() -> dict[str, str]:
    engine = get_engine()
    made = {name: _run() for name in (
        "awaiting", "awaiting_no_window", "publish_failed", "approved_stalled", "published",
        "rejected", "failed", "dead_lease", "stale_remote_lease", "live_lease",
        "verified_holds", "verified_fails", "forged_column", "tampered_event",
        "rejected_old_window")}
    for name in ("awaiting", "awaiting_no_window", "publish_failed", "approved_stalled",
                 "published", "rejected", "forged_column", "rejected_old_window"):
        to_awaiting(made[name], engine)
    _window(made["awaiting"], pending.expiry(3600))
    _window(made["rejected_old_window"], _ago(3600))  # decided: its old window stays
    for name in ("publish_failed", "approved_stalled", "published"):
        runs.decide(made[name], reviewer="rita", decision="approve", reason="fine", engine=engine)
    runs.record_publish_failure(made["publish_failed"], actor="flow", error="disk full")
    runs.transition(made["published"], Status.PUBLISHED, actor="flow")
    for name in ("rejected", "rejected_old_window"):
        runs.decide(made[name], reviewer="rita", decision="reject", reason="too coarse",
                    engine=engine)
    runs.fail_run(made["failed"], actor="flow", error="the verifier refused: k < 5")
    _lease(made["dead_lease"], socket.gethostname(), _dead_pid(), utc_now())
    _lease(made["stale_remote_lease"], "elsewhere.example", 1, _ago(600))
    _lease(made["live_lease"], socket.gethostname(), os.getpid(), utc_now())
    for name, holds in (("verified_holds", True), ("verified_fails", False)):
        runs.transition(made[name], Status.ANONYMIZED, actor="flow")
        runs.save_verification(made[name], {"holds": holds, "requirements": []})
    # An insider edits the column; the chain still says who asked (status shows the chain).
    _sql("UPDATE release_runs SET requester = 'olga' WHERE id = :r", r=made["forged_column"])
    # A forged run.requested event no longer authenticates: status falls back to the column.
    _sql("UPDATE audit_events SET actor = 'mallory' WHERE run_id = :r AND "
         "action = 'run.requested'", r=made["tampered_event"])
    return made


@contextmanager
def _only(path: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Take the other path away: ``quick`` fails loudly if the full path is asked."""
    with monkeypatch.context() as m:
        if path == "quick":
            def refuse(*_a: object, **_k: object) -> None:
                raise AssertionError("the quick path gave way to the full path")

            for name in ("run_summary", "run_state", "expire_overdue"):
                m.setattr(service, name, refuse)
            m.setattr(runs, "list_runs", refuse)
            m.setattr(run_ids, "_OrmRunIds", refuse)
        else:
            @contextmanager
            def no_rows() -> Iterator[None]:
                yield None

            m.setattr(quick_read, "open_rows", no_rows)
        yield


def _both(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    out = {}
    for path in ("quick", "full"):
        with _only(path, monkeypatch):
            result = runner.invoke(app, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), \
            result.exception
        out[path] = (result.exit_code, result.stdout, result.stderr)
    return out["quick"], out["full"]


CASES = ["awaiting", "awaiting_no_window", "publish_failed", "approved_stalled", "published",
         "rejected", "failed", "dead_lease", "stale_remote_lease", "live_lease",
         "verified_holds", "verified_fails", "forged_column", "tampered_event",
         "rejected_old_window"]


@pytest.mark.parametrize("as_json", [False, True])
def test_status_says_the_same_bytes_either_way(many_runs, monkeypatch, as_json) -> None:
    shown = set()
    for name in CASES:
        args = ["status", many_runs[name], *(["--json"] if as_json else [])]
        quick, full = _both(args, monkeypatch)
        assert quick == full, name
        assert quick[0] == 0, quick
        shown.add(json.loads(quick[1])["status"] if as_json else
                  next(ln.split(": ", 1)[1] for ln in quick[1].splitlines()
                       if ln.strip().startswith("status:")))
    # the cases reach every way a run is shown (a case that stopped doing so is caught)
    assert shown == {"awaiting_approval", "publication failed", "stalled", "published",
                     "rejected", "failed", "requested"}


def test_status_shows_the_chains_requester_not_the_column(many_runs, monkeypatch) -> None:
    with _only("quick", monkeypatch):
        forged = runner.invoke(app, ["status", many_runs["forged_column"], "--json"])
        tampered = runner.invoke(app, ["status", many_runs["tampered_event"], "--json"])
    assert json.loads(forged.stdout)["requester"] == "steward"  # not olga
    assert json.loads(tampered.stdout)["requester"] == "steward"  # the column; not mallory


def test_list_shows_the_chains_requester_not_the_column(many_runs, monkeypatch) -> None:
    for path in ("quick", "full"):
        with _only(path, monkeypatch):
            listed = runner.invoke(app, ["list"]).stdout.splitlines()
        forged = next(ln for ln in listed if ln.startswith(many_runs["forged_column"]))
        assert " steward " in forged and " olga " not in forged, (path, forged)


@pytest.mark.parametrize("limit", ["50", "3", "0"])
def test_list_says_the_same_bytes_either_way(many_runs, monkeypatch, limit) -> None:
    quick, full = _both(["list", "--limit", limit], monkeypatch)
    assert quick == full
    assert len(quick[1].splitlines()) == 1 + min(int(limit), len(CASES))


def test_run_id_prefixes_resolve_the_same_either_way(many_runs, monkeypatch) -> None:
    one = many_runs["awaiting"]
    for given in (one, one[:12], one[4:14], " " + one[:14] + " ", "rel-", "rel-zzzz", "zzzz",
                  "rel-%", "rel-_", "%", "REL-" + one[4:12]):
        quick, full = _both(["status", given], monkeypatch)
        assert quick == full, given
    ambiguous = _both(["status", "rel-"], monkeypatch)[0]
    assert ambiguous[0] == 1 and "is the start of 11+ runs" in ambiguous[2]
    assert _both(["status", one[4:14]], monkeypatch)[0][0] == 0
    unknown = _both(["status", "rel-%"], monkeypatch)[0]
    assert unknown[0] == 1 and "no release run with id 'rel-%'" in unknown[2]


def _timeout_events(run_id: str) -> list[dict]:
    return [e for e in map(json.loads, export_events(run_id, "jsonl").splitlines())
            if e["actor"] == service.TIMEOUT_ACTOR]


@pytest.mark.parametrize("command", ["status", "list"])
def test_an_overdue_window_is_still_expired_on_sight(many_runs, command) -> None:
    late = many_runs["awaiting_no_window"]
    _window(late, _ago(1))
    assert quick_read.run_summary(late) is None and quick_read.run_list(50) is None
    result = runner.invoke(app, ["status", late] if command == "status" else ["list"])
    assert result.exit_code == 0, result.output
    assert runs.get_run(late).status == Status.REJECTED
    assert [e["action"] for e in _timeout_events(late)] == ["run.rejected"]
    if command == "status":
        assert "status: rejected\n" in result.stdout
    else:
        assert " rejected " in next(ln for ln in result.stdout.splitlines() if late in ln)
    assert quick_read.run_list(50) is not None  # expired once; quick again


def test_another_runs_overdue_window_does_not_stop_a_quick_status(many_runs) -> None:
    _window(many_runs["awaiting_no_window"], _ago(1))
    assert quick_read.run_summary(many_runs["published"]) is not None


@pytest.mark.parametrize("spoil", ["postgres", "not_at_head", "no_file", "loose", "memory",
                                   "options"])
def test_the_quick_path_gives_way(many_runs, ehr_home, monkeypatch, spoil) -> None:
    db = ehr_home / "db.sqlite"
    assert quick_read.run_summary(many_runs["published"]) is not None
    if spoil == "postgres":
        monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", "postgresql+psycopg://u@h/d")
    elif spoil == "not_at_head":
        _sql("UPDATE alembic_version SET version_num = '0000'")
    elif spoil == "no_file":
        monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", f"sqlite:///{ehr_home / 'other.db'}")
    elif spoil == "loose":
        db.chmod(0o644)
    elif spoil == "memory":
        monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", "sqlite:///:memory:")
    else:
        monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", f"sqlite:///{db}?timeout=5")
    with sqlite_read.open_rows() as rows:
        assert rows is None
    assert quick_read.run_summary(many_runs["published"]) is None
    assert quick_read.run_list(50) is None


def test_the_quick_path_opens_the_database_read_only(many_runs) -> None:
    with sqlite_read.open_rows() as rows:
        assert rows is not None
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            rows._conn.execute("DELETE FROM release_runs")
        rows._conn.execute("PRAGMA query_only=0")  # the file itself is opened read-only too
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            rows._conn.execute("DELETE FROM release_runs")
    assert len(runs.list_runs()) == len(CASES)


PROBE = """
import json, sys
sys.argv = ["ehr-release", *json.loads(sys.argv[1])]
from ehr_release import cli
from ehr_release.cli import run_cli
cli._leave = sys.exit  # raise, not end the interpreter: the probe reads sys.modules after
try:
    run_cli()
except SystemExit as exc:
    print("exit", exc.code)
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


@pytest.fixture
def default_home(ehr_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``ehr_home`` with its database where it is by default (no URL configured)."""
    monkeypatch.delenv("EHR_RELEASE_DATABASE_URL")
    reset_engines()
    return ehr_home


@pytest.mark.parametrize("args", [["list"], ["status", "RUN"], ["status", "RUN", "--json"],
                                  ["status", "PREFIX"], ["status", "rel-"],
                                  ["status", "rel-unknown"]])
def test_status_and_list_import_no_database_library(default_home, args) -> None:
    """In a fresh interpreter, on the default home's database: the answer is printed and
    SQLAlchemy, SQLModel and Pydantic (nor anything else heavy) were never imported."""
    run = _make_many_runs()["forged_column"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "EHR_"))}
    env.update(PYTHONPATH=str(SRC), EHR_RELEASE_HOME=str(default_home))
    argv = [{"RUN": run, "PREFIX": run[:14]}.get(a, a) for a in args]
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    *printed, code, modules = done.stdout.strip().splitlines()
    assert set(json.loads(modules)) & set(HEAVY) == set(), done.stderr
    if args[0] == "list":
        assert code == "exit 0" and len(printed) == 1 + len(CASES)
    elif args[1:] in (["RUN"], ["PREFIX"]):
        assert code == "exit 0" and "   requester: steward" in printed  # the chain's
    elif args[1:] == ["RUN", "--json"]:
        assert code == "exit 0" and json.loads("\n".join(printed))["requester"] == "steward"
    else:
        assert (code, printed) == ("exit 1", []) and done.stderr.startswith("error: ")
