"""Issue 34, finding 10: the command line's edges — a readable ``status`` with the effective
parameters, run-id prefixes wherever a run id is taken.

Found: ``status`` printed Python dicts (``parameters: {'config': …}``, ``decision: {…}``) and
hid ArtUC's effective k, δ, ε (they come from its configuration's ``defaults:``); every
command wanted the full 36-character run id.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.storage import runs
from ehr_release.storage.actions import Decision
from ehr_release.storage.audit import export_events
from ehr_release.storage.models import DatasetRecord
from tests.test_storage import PATH_TO_AWAITING

runner = CliRunner()
CONFIG = Path(__file__).resolve().parents[1] / "examples" / "artuc-mimic" / "config.yaml"


def _run(run_id: str, algorithm: str = "artuc", parameters: dict | None = None) -> str:
    ds = DatasetRecord(fingerprint="ef" * 32, rows=10, codes=30, columns_json="{}", source="x")
    runs.create_run(run_id=run_id, dataset=ds, requester="steward.sam", algorithm=algorithm,
                    parameters=parameters or {"config": str(CONFIG)}, out_dir="/tmp")
    for status in PATH_TO_AWAITING:
        runs.transition(run_id, status, actor="flow")
    return run_id


def test_status_is_plain_lines_with_the_effective_parameters(ehr_home) -> None:
    run_id = _run("rel-" + "a1" * 16)
    runs.decide(run_id, reviewer="rita", decision=Decision.REJECT, reason="too coarse")
    shown = runner.invoke(app, ["status", run_id])
    assert shown.exit_code == 0, shown.output
    assert "{" not in shown.output and "}" not in shown.output  # no Python dicts
    lines = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip()
             for ln in shown.output.splitlines()}
    # config.yaml's defaults: k=5, m=2, delta=0.3, epsilon=6%
    for pair in ("k=5", "m=2", "delta=0.3", "epsilon=6%"):
        assert pair in lines["parameters"], lines
    assert lines["as requested"] == f"config={CONFIG}"
    assert lines["decision"].startswith("reject by rita on ")
    assert lines["decision"].endswith(": too coarse")
    as_json = json.loads(runner.invoke(app, ["status", run_id, "--json"]).output)
    assert as_json["effective_parameters"]["k"] == 5


def test_a_unique_prefix_names_the_run_everywhere(ehr_home) -> None:
    one = _run("rel-" + "b2" * 16, "code-counts", {"k": "2"})
    _run("rel-" + "c3" * 16, "code-counts", {"k": "2"})
    _run("rel-" + "c3c4" * 8, "code-counts", {"k": "2"})
    for prefix in ("rel-b2b2", "b2b2b2"):
        shown = runner.invoke(app, ["status", prefix])
        assert shown.exit_code == 0, shown.output
        assert one in shown.output
    exported = runner.invoke(app, ["audit", "export", "--run", "b2b"])
    assert exported.exit_code == 0 and one in exported.output
    decided = runner.invoke(app, ["approve", "rel-b2", "--reviewer", "rita", "--decision",
                                  "reject", "--reason", "no"])
    assert decided.exit_code == 0, decided.output
    assert runs.get_run(one).status == "rejected"
    ambiguous = runner.invoke(app, ["status", "c3"])
    assert ambiguous.exit_code == 1
    line = ambiguous.output.strip()
    assert "\n" not in line and "is the start of 2 runs" in line
    assert "rel-" + "c3" * 16 in line and "rel-" + "c3c4" * 8 in line
    unknown = runner.invoke(app, ["approve", "rel-ffff", "--reviewer", "rita", "--decision",
                                  "reject", "--reason", "no"])
    assert unknown.exit_code == 1 and "no release run with id 'rel-ffff'" in unknown.output
    assert '"requested_run"' in export_events(None, "jsonl") or "rel-ffff" in export_events(
        None, "jsonl")  # the attempt on an unknown run is still audited


def test_comparison_rows_are_numbered_from_one_everywhere() -> None:
    """``compare`` counted candidates from 1 and the report's rows from 0: `--row 1` took
    the second row. The plan numbers rows from 1; the report, task names and progress
    show that number."""
    from ehr_release import registry
    from ehr_release.comparison.compare import plan
    from ehr_release.tasks.naming import candidate_run_name

    candidates = plan([registry.get("disassociation")], {"m": "2"}, {"k": ["5", "10"]})
    assert [c.index for c in candidates] == [1, 2]
    assert candidate_run_name({"candidate": candidates[0]}).startswith(
        "candidate[1: disassociation")
