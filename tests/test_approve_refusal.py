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

#: Packages a refusal must not load: the publishing flow's (Prefect, WeasyPrint) and the
#: algorithms' (pandas, numba, SciPy).
HEAVY = ("prefect", "pandas", "weasyprint", "numba", "scipy")

DRIVER = """
import json, sys
from typer.testing import CliRunner
from ehr_release.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[0])))
print(json.dumps({"exit": result.exit_code, "output": result.output, "heavy": heavy}))
"""


def _approve(home: Path, run_id: str, reviewer: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER.replace("sys.argv[0]", repr(json.dumps(HEAVY))),
         "approve", run_id, "--reviewer", reviewer, "--decision", "approve",
         "--reason", "looks fine"],
        capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["already decided", "unknown run", "self-approval",
                                  "not awaiting"])
def test_a_refused_approval_loads_nothing_heavy(ehr_home: Path, case: str) -> None:
    run = make_run(None, requester="steward.sam")
    if case != "not awaiting":
        to_awaiting(run.id, None)
    if case == "already decided":
        runs.decide(run.id, reviewer="olga", decision=Decision.REJECT, reason="too coarse")
    run_id = "rel-" + "0" * 32 if case == "unknown run" else run.id
    reviewer = "steward.sam" if case == "self-approval" else "priv.officer"
    result = _approve(ehr_home, run_id, reviewer)
    expected = {"already decided": "already decided (reject by olga)",
                "unknown run": "no release run with id",
                "self-approval": "requested this run and may not decide it",
                "not awaiting": "is requested, not awaiting approval"}[case]
    assert result["exit"] == 1 and expected in result["output"], result
    assert result["heavy"] == [], f"refused only after importing {result['heavy']}"
    assert runs.get_run(run.id).status != "approved"
