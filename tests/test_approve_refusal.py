"""Issue 34 finding 9 / issue 37 goal 3: ``approve`` refuses at once.

Found: refusing an already decided run took 30 s under load — the decision's ε check loaded
every registered algorithm (LDA's numba kernels, pandas, SciPy) before the run's status was
looked at. A refusal needs the database only: the test drives the CLI in a fresh
interpreter and asserts which heavy packages it imported before answering.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ehr_release.storage import runs
from ehr_release.storage.actions import Decision
from tests.test_storage import make_run, to_awaiting

#: Packages a refusal must not load: the publishing flow's (Prefect, WeasyPrint), the
#: algorithms' (pandas, numba, SciPy), the history re-check's (NumPy: a self-approval was
#: refused only after it) and the progress display's (Rich: nothing is shown before).
HEAVY = ("prefect", "pandas", "weasyprint", "numba", "scipy", "numpy", "rich")

DRIVER = """
import json, sys
from typer.testing import CliRunner
from ehr_release.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[0])))
print(json.dumps({"exit": result.exit_code, "output": result.output, "heavy": heavy}))
"""


def _approve(home: Path, run_id: str, reviewer: str, decision: str = "approve") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER.replace("sys.argv[0]", repr(json.dumps(HEAVY))),
         "approve", run_id, "--reviewer", reviewer, "--decision", decision,
         "--reason", "looks fine"],
        capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["already decided", "unknown run", "self-approval",
                                  "not awaiting", "bad decision word"])
def test_a_refused_approval_loads_nothing_heavy(ehr_home: Path, case: str) -> None:
    run = make_run(None, requester="steward.sam")
    if case != "not awaiting":
        to_awaiting(run.id, None)
    if case == "already decided":
        runs.decide(run.id, reviewer="olga", decision=Decision.REJECT, reason="too coarse")
    run_id = "rel-" + "0" * 32 if case == "unknown run" else run.id
    reviewer = "steward.sam" if case == "self-approval" else "priv.officer"
    result = _approve(ehr_home, run_id, reviewer,
                      "maybe" if case == "bad decision word" else "approve")
    expected = {"bad decision word": "decision must be approve or reject, got 'maybe'",
                "already decided": "already decided (reject by olga)",
                "unknown run": "no release run with id",
                "self-approval": "requested this run and may not decide it",
                "not awaiting": "is requested, not awaiting approval"}[case]
    assert result["exit"] == 1 and expected in result["output"], result
    assert result["heavy"] == [], f"refused only after importing {result['heavy']}"
    assert runs.get_run(run.id).status != "approved"


def test_a_decision_shows_its_steps_on_stderr(ehr_home: Path) -> None:
    """``approve`` was silent until it ended; each step now shows on stderr with its time,
    stdout keeps the one line scripts read."""
    run = make_run(None, requester="steward.sam")
    to_awaiting(run.id, None)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    done = subprocess.run(
        [sys.executable, "-m", "ehr_release.cli", "approve", run.id, "--reviewer", "olga",
         "--decision", "reject", "--reason", "too coarse"],
        capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"{run.id}: rejected"
    lines = done.stderr.strip().splitlines()
    assert lines[0] == f"reject {run.id}", done.stderr
    assert lines[1].startswith("  ok record the decision") and lines[1].endswith(" s)")


def test_steps_show_in_order_and_a_failed_one_is_marked(capsys) -> None:
    from ehr_release.cli_support.progress import StepProgress
    from ehr_release.tasks.steps import step

    step("nobody listens")  # no display: nothing happens
    ticks = iter(range(100))
    with StepProgress("approve rel-1", live=False, clock=lambda: float(next(ticks))) as shown:
        step("record the decision")
        step("start the publishing flow (Prefect)")
        shown.failed()
    step("after the block")  # the display no longer listens
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "approve rel-1"
    assert err[1].startswith("  ok record the decision") and "1.0 s" in err[1]
    assert err[2].startswith("  !! start the publishing flow (Prefect)")
    assert len(err) == 3


def test_approving_a_k_anonymous_run_loads_no_other_algorithm(ehr_home: Path) -> None:
    """The decision's ε check loaded every registered algorithm (LDA's numba kernels) to
    learn that a disassociation release spends no ε: 3.7 s of a loaded machine's approve."""
    from ehr_release.storage.models import DatasetRecord

    ds = DatasetRecord(fingerprint="cd" * 32, rows=10, codes=30, columns_json="{}", source="x")
    run = runs.create_run(run_id=runs.new_run_id(), dataset=ds, requester="steward.sam",
                          algorithm="disassociation", parameters={"k": "5", "m": "2"},
                          out_dir=str(ehr_home.parent))
    to_awaiting(run.id, None)
    script = ("import sys\nfrom ehr_release.storage import runs\n"
              f"runs.decide({run.id!r}, reviewer='olga', decision='approve', reason='fine')\n"
              "print(sorted(m for m in sys.modules if m.startswith('ehr_release.algorithms.')"
              " and m.split('.')[2] != 'disassociation' or m == 'numba'))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert runs.get_run(run.id).status == "approved"
