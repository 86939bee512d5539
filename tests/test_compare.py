"""Side-by-side comparison: planning, the recommendation rule, the flow, the report, the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.comparison.compare import (
    Candidate,
    Outcome,
    parse_grid,
    parse_requirement,
    plan,
    recommend,
)
from ehr_release.core.errors import EhrReleaseError, ParameterError
from ehr_release.planning.request import ComparisonRequest
from ehr_release.registry import get as get_algorithm
from ehr_release.storage.audit import export_events, verify_chain


def outcome(i: int, k: int, loss: float | None, verified: bool = True) -> Outcome:
    return Outcome(Candidate(i, "a", {"k": str(k)}), verified, "ARE", loss,
                   failures=[] if verified else ["k^m: support 1"])


def test_grid_and_requirements_parse_or_name_the_problem() -> None:
    assert parse_grid(["k=5, 10,25", "m=1"]) == {"k": ["5", "10", "25"], "m": ["1"]}
    for bad in (["k"], ["=5"], ["k="], ["k=1", "k=2"]):
        with pytest.raises(ParameterError, match="--param-grid"):
            parse_grid(bad)
    req = parse_requirement("k >= 10")
    assert req.met_by({"k": "10"}) and not req.met_by({"k": "9"}) and not req.met_by({})
    with pytest.raises(ParameterError, match="--require"):
        parse_requirement("k is big")


def test_plan_crosses_algorithms_and_grid_and_checks_values() -> None:
    dis = get_algorithm("disassociation")
    cands = plan([dis], {"m": "2"}, {"k": ["2", "3"]})
    assert [c.params for c in cands] == [{"m": "2", "k": "2"}, {"m": "2", "k": "3"}]
    with pytest.raises(ParameterError, match="algorithm disassociation"):
        plan([dis], {}, {"k": ["1"]})
    with pytest.raises(ParameterError, match="none of epsilon"):
        plan([dis], {}, {"epsilon": ["1"]})


def test_recommendation_is_least_loss_among_verified_candidates_meeting_requirements() -> None:
    outcomes = [outcome(0, 5, 0.01), outcome(1, 10, 0.05), outcome(2, 25, 0.02, verified=False),
                outcome(3, 25, 0.09), outcome(4, 50, None)]
    best, reasons = recommend(outcomes, [parse_requirement("k>=10")])
    assert best is outcomes[1]
    assert any("does not meet k >= 10" in r for r in reasons)
    assert any("verification failed" in r for r in reasons)
    assert any("reports no ARE" in r for r in reasons)
    best, _ = recommend(outcomes, [parse_requirement("k>=10")], max_loss=0.04)
    assert best is None
    tie = [outcome(0, 5, 0.01), outcome(1, 10, 0.01)]
    assert recommend(tie, [])[0] is tie[1]  # same loss: take the stronger privacy


def test_a_dp_row_is_shown_but_never_recommended_nor_released_from(tmp_path) -> None:
    """Choosing ε or h by utility measured on the true data spends budget the ledger does
    not count (spec 04): DiffGen's rows stay in the report, out of the choice."""
    from ehr_release.comparison.comparison_file import load_comparison_row

    cands = plan([get_algorithm("diffgen"), get_algorithm("disassociation")],
                 {"m": "2", "k": "5", "epsilon": "1", "h": "4", "taxonomies": "adult"}, {})
    assert [c.differentially_private for c in cands] == [True, False]
    dp = Outcome(cands[0], True, "error rate", 0.001)
    kanon = Outcome(cands[1], True, "error rate", 0.5)
    best, reasons = recommend([dp, kanon], [])
    assert best is kanon
    assert any(r.startswith("diffgen") and "never recommended" in r for r in reasons)
    assert recommend([dp], [])[0] is None

    report = {"dataset_fingerprint": "f", "rows": [o.to_dict() for o in (dp, kanon)]}
    report["rows"][0]["candidate"].pop("differentially_private")  # a report from before
    (tmp_path / "comparison.json").write_text(json.dumps(report))
    with pytest.raises(EhrReleaseError, match="row 1 .* is diffgen, which is ε-differentially"):
        load_comparison_row(str(tmp_path), 1)
    assert load_comparison_row(str(tmp_path), 2)[0] == "disassociation"


def _request(data, out, **extra) -> ComparisonRequest:
    base = {"comparison_id": "cmp-" + "ab" * 16, "input_path": str(data),
            "algorithms": ["disassociation", "leaky-code-counts"], "params": {"m": "2"},
            "grid": {"k": ["2", "3"]}, "requirements": ["k>=3"], "requester": "steward",
            "out_dir": str(out)}
    return ComparisonRequest(**(base | extra))


def test_flow_compares_in_parallel_tasks_and_writes_the_report(env) -> None:
    from ehr_release.flows.compare import compare_flow, load_comparison_row

    data, out = env
    request = _request(data, out)
    report = compare_flow(request)
    rows = report["rows"]
    assert [(r["candidate"]["algorithm"], r["candidate"]["params"]["k"], r["verified"])
            for r in rows] == [("disassociation", "2", True), ("disassociation", "3", True),
                               ("leaky-code-counts", "2", False),
                               ("leaky-code-counts", "3", False)]
    assert all(r["loss_metric"] == "ARE W2 (estimator)" for r in rows[:2])
    # Rows are numbered from 1 everywhere (issue 34: progress counted from 1, rows from 0).
    assert [r["candidate"]["index"] for r in rows] == [1, 2, 3, 4]
    assert report["recommended_row"] == 2  # the only verified candidate with k ≥ 3
    folder = request.folder
    assert json.loads((folder / "comparison.json").read_text()) == report
    assert (folder / "comparison.pdf").read_bytes().startswith(b"%PDF")
    html = (folder / "comparison.html").read_text()
    assert "disassociation (k=3, m=2)" in html and "data:image/png;base64," in html
    assert not list(folder.parent.glob(".staging-*"))
    # Utilities measured on the original data: owner-only under the releases root.
    assert folder.stat().st_mode & 0o777 == 0o700
    assert {(f.name, f.stat().st_mode & 0o777) for f in folder.iterdir()} == {
        ("comparison.json", 0o600), ("comparison.html", 0o600), ("comparison.pdf", 0o600)}
    assert "comparison.completed" in export_events(None, "jsonl") and verify_chain().ok
    # Its flow run is found by the comparison and by each family it tried (issue 34).
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        found = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[f"comparison:{request.comparison_id}"])),
            sort=FlowRunSort.START_TIME_DESC, limit=10, offset=0)
    assert [f.name for f in found] == [f"compare-{request.comparison_id}"]
    assert {"algorithm:disassociation", "algorithm:leaky-code-counts",
            "source:default"} <= set(found[0].tags)

    algorithm, params, fingerprint = load_comparison_row(str(folder), 2)
    assert (algorithm, params) == ("disassociation", {"m": "2", "k": "3"})
    assert load_comparison_row(str(folder), 1)[1] == {"m": "2", "k": "2"}  # the first row
    with pytest.raises(EhrReleaseError, match="did not verify"):
        load_comparison_row(str(folder), 3)
    with pytest.raises(EhrReleaseError, match="rows 1–4; got 0"):
        load_comparison_row(str(folder), 0)

    # A release from a row must read exactly the data that was compared.
    from ehr_release import service

    other = data.with_name("other.csv")
    other.write_text(data.read_text().replace("S000,30", "S000,31"))
    request = service.request_from_cli(
        input_path=other, diagnoses=None, admissions=None, class_column=None,
        algorithm=algorithm, params=params, requester="steward", out_dir=out,
        approval_timeout_s=60, expected_fingerprint=fingerprint)
    with pytest.raises(EhrReleaseError, match="not the dataset the comparison was run on"):
        service.precheck(request)


def test_cli_refuses_bad_comparisons_before_running(cli_env_compare) -> None:
    data, out = cli_env_compare
    runner = CliRunner()
    base = ["compare", "--input", str(data), "--requester", "steward", "--out", str(out),
            "--algorithm", "disassociation"]
    for extra, message in [(["--param-grid", "k"], "--param-grid"),
                           (["--param-grid", "k=1"], "algorithm disassociation"),
                           (["--require", "k big"], "--require"),
                           (["--algorithm", "nope"], "'nope' is not registered")]:
        result = runner.invoke(app, base + extra)
        assert result.exit_code == 1, result.output
        assert message in result.output
    assert not (out / "comparisons").exists()
    result = runner.invoke(app, ["run", "--input", str(data), "--requester", "s", "--out",
                                 str(out), "--from-comparison", str(out), "--algorithm", "x"])
    assert result.exit_code == 1 and "do not also give --algorithm" in result.output


@pytest.fixture
def cli_env_compare(flow_csv, tmp_path):
    return flow_csv, tmp_path / "out"


def test_artucs_own_comparators_are_off_inside_a_comparison() -> None:
    """The other candidates are the comparison; the row keeps the parameters as given."""
    from ehr_release import registry
    from ehr_release.flows.compare import within_comparison

    artuc, dis = registry.get("artuc"), registry.get("disassociation")
    assert within_comparison(artuc, {"k": "5"}) == {"compare": "false", "k": "5"}
    assert within_comparison(artuc, {"k": "5", "compare": "true"})["compare"] == "true"
    assert within_comparison(dis, {"k": "5"}) == {"k": "5"}  # takes no such parameter


def test_a_dp_rows_loss_is_not_logged_to_prefect(monkeypatch) -> None:
    """Prefect keeps the comparison's log lines outside the report: a DP row's loss is
    measured on the true data (ε does not cover it), so its line names the metric only,
    as the release flow's utility artifact does; a k-anonymity row's line keeps its loss."""
    from ehr_release.flows import compare as compare_flow_module

    lines: list[str] = []

    class Logger:
        def info(self, message: str, *args: object) -> None:
            lines.append(message % args)

    monkeypatch.setattr(compare_flow_module, "get_run_logger", lambda: Logger())
    dp = Outcome(Candidate(0, "diffgen", {"epsilon": "1"}, differentially_private=True),
                 True, "count error: mean absolute", 0.660194)
    kanon = Outcome(Candidate(1, "disassociation", {"k": "5"}), True, "ARE", 0.123456)
    compare_flow_module._announce(dp, 1, 2)
    compare_flow_module._announce(kanon, 2, 2)
    assert "0.6602" not in lines[0] and "count error: mean absolute" in lines[0]
    assert "0.1235" in lines[1]


def test_a_comparison_lands_only_under_the_releases_root(cli_env_compare, tmp_path,
                                                         monkeypatch) -> None:
    """The report holds utilities measured on the original data (DiffGen's rows too): like a
    release, it may land only under the releases root, never in a folder --out names
    elsewhere (a share outside the trust boundary)."""
    data, _ = cli_env_compare
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("EHR_RELEASE_RELEASES_ROOT", str(root))
    elsewhere = tmp_path / "share"
    result = CliRunner().invoke(app, ["compare", "--input", str(data), "--requester", "steward",
                                      "--out", str(elsewhere), "--algorithm", "disassociation",
                                      "--param", "k=2"])
    assert result.exit_code == 1, result.output
    assert "outside the releases root" in result.output
    assert not elsewhere.exists()
