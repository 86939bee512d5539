"""The ``disassociation`` registry entry: parameters, policy files, verify CLI, task runner."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from ehr_release import registry
from ehr_release.algorithms.disassociation.core import verpart_batch
from ehr_release.cli import app
from ehr_release.core.errors import ConfigError, ParameterError
from ehr_release.ingest import read_dataset
from ehr_release.registry import disassociation as entry_module
from ehr_release.samples.sample import generate_sample, write_sample
from tests.disassociation_layout import files_of, read_doc

runner = CliRunner()


@pytest.fixture(scope="module")
def entry():
    return registry.get("disassociation")


@pytest.fixture(scope="module")
def dataset():
    return generate_sample(250, seed=6)


def test_registered_with_its_parameters(entry):
    assert "disassociation" in registry.names()
    assert [p.name for p in entry.params] == ["k", "m", "policy", "max_cluster_size", "seed"]
    assert entry.parse({"k": "5"}) == {"k": 5, "m": 2, "policy": "hierarchy:3digit",
                                       "max_cluster_size": None, "seed": None}


@pytest.mark.parametrize("given, parameter, rule", [
    ({"k": "1"}, "k", "≥ 2"),
    ({"k": "5", "m": "0"}, "m", "≥ 1"),
    ({"k": "5", "policy": "sim5"}, "policy", "hierarchy:3digit"),
    ({"k": "5", "policy": "frequent:200"}, "policy", "hierarchy:3digit"),
    ({}, "k", "is required"),
])
def test_bad_parameters(entry, given, parameter, rule):
    with pytest.raises(ParameterError) as info:
        entry.parse(given)
    assert info.value.parameter == parameter and rule in info.value.rule


def test_k_larger_than_the_data_is_refused(entry, dataset):
    with pytest.raises(ParameterError, match="must not exceed the number of records"):
        entry.anonymize(dataset, entry.parse({"k": "251"}), np.random.default_rng(0))


@pytest.mark.parametrize("policy", ["hierarchy:section", "similar:10", "frequent:2.5"])
def test_end_to_end_with_each_policy_kind(entry, dataset, policy):
    params = entry.parse({"k": "4", "m": "2", "policy": policy})
    files = entry.anonymize(dataset, params, np.random.default_rng(1))
    assert list(files) == ["release.parquet"]
    report = entry.verify(files, dataset, params)
    assert report.holds, report.to_dict()


def test_yaml_policy_file(entry, dataset, tmp_path):
    common = sorted(dataset.distinct_codes())[:4]
    path = tmp_path / "policy.yaml"
    path.write_text("constraints:\n  study: [" + ", ".join(f'"{c}"' for c in common) + "]\n")
    params = entry.parse({"k": "3", "policy": str(path)})
    files = entry.anonymize(dataset, params, np.random.default_rng(2))
    assert entry.verify(files, dataset, params).holds
    missing = entry.parse({"k": "3", "policy": str(tmp_path / "nope.yaml")})
    with pytest.raises(ConfigError, match="cannot be read"):
        entry.anonymize(dataset, missing, np.random.default_rng(2))


def test_evaluate_reports_utility(entry, dataset):
    params = entry.parse({"k": "4"})
    files = entry.anonymize(dataset, params, np.random.default_rng(3))
    report = entry.evaluate(files, dataset, params, np.random.default_rng(4))
    assert report.algorithm == "disassociation"
    assert report.metrics["suppressed codes"] == 0
    assert report.charts[0].name == "mre-histogram"


def test_verify_cli_on_a_published_folder(ehr_home, tmp_path, entry):
    source = write_sample(generate_sample(120, seed=3), tmp_path / "extract.csv")
    original = read_dataset(source)
    params = entry.parse({"k": "3", "m": "2"})
    folder = tmp_path / "release"
    folder.mkdir()
    files = entry.anonymize(original, params, np.random.default_rng(5))
    (folder / "release.parquet").write_bytes(files["release.parquet"])
    args = ["verify", "--algorithm", "disassociation", "--release", str(folder),
            "--original", str(source), "--param", "k=3", "--param", "m=2"]
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["holds"] is True
    doc = read_doc(files["release.parquet"])
    doc["clusters"][0]["size"] = 1
    (folder / "release.parquet").write_bytes(files_of(doc)["release.parquet"])
    bad = runner.invoke(app, args)
    assert bad.exit_code == 1 and '"holds": false' in bad.output


def test_batches_run_in_order_outside_a_flow():
    batches = [[[(0, 1), (0,), (1,)]], [[(2,), (2,)]]]
    work = lambda b: verpart_batch(b, 2, 2, np.full(3, -1))  # noqa: E731
    assert entry_module._task_runner_map(work, batches) == [work(b) for b in batches]


@pytest.mark.parametrize("processes", [True, False])
def test_batches_go_through_a_process_runner_but_not_threads(harness, monkeypatch, processes):
    """With worker processes (Dask) batches become tasks; on threads they stay in line."""
    from prefect import flow

    if processes:  # the routing decision, without starting a Dask cluster here
        monkeypatch.setattr(entry_module, "_runner_runs_processes", lambda: True)

    seen: list[str] = []

    def work(batch):
        from prefect.context import TaskRunContext

        context = TaskRunContext.get()
        seen.append(context.task.name if context else "none")
        return verpart_batch(batch, 2, 2, np.full(3, -1))

    batches = [[[(0, 1), (0,), (1,)]], [[(2,), (2,)]], [[(1, 2), (1, 2)]]]

    @flow(name="disassociation-batches-test")
    def run():
        return entry_module._task_runner_map(work, batches)

    assert run() == [work(b) for b in batches]
    assert seen[:3] == ["disassociation-verpart-batch" if processes else "none"] * 3


def test_reconstruct_cli_writes_a_loadable_table(entry, dataset, tmp_path):
    params = entry.parse({"k": "3", "m": "2", "seed": "4"})
    files = entry.anonymize(dataset, params, np.random.default_rng(4))
    (tmp_path / "release.parquet").write_bytes(files["release.parquet"])
    runner = CliRunner()
    tables = []
    for seed in ("1", "1", "2"):
        out = tmp_path / f"recon-{len(tables)}.csv"
        result = runner.invoke(app, ["reconstruct", "--release", str(tmp_path / "release.parquet"),
                                     "--out", str(out), "--seed", seed])
        assert result.exit_code == 0, result.output
        tables.append(read_dataset(out))
    recon = tables[0]
    assert recon.n_patients == dataset.n_patients
    assert set(recon.diagnoses["code"]) <= set(dataset.diagnoses["code"])
    assert tables[0].code_sets() == tables[1].code_sets()  # same seed, same table
    bad = runner.invoke(app, ["reconstruct", "--release", str(tmp_path / "nope.json"),
                              "--out", str(tmp_path / "x.csv")])
    assert bad.exit_code == 1 and "does not exist" in bad.output


def test_verify_reads_the_parameters_the_release_declares(ehr_home, tmp_path, entry):
    """Issue 34: ``verify`` asked for k and m the release's manifest states, and printed
    nothing on stderr when the guarantee failed. Now the manifest's algorithm and
    parameters are the defaults and a one-line verdict goes to stderr."""
    source = write_sample(generate_sample(120, seed=3), tmp_path / "extract.csv")
    params = entry.parse({"k": "3", "m": "2"})
    folder = tmp_path / "release"
    folder.mkdir()
    files = entry.anonymize(read_dataset(source), params, np.random.default_rng(5))
    (folder / "release.parquet").write_bytes(files["release.parquet"])
    manifest = {"run_id": "rel-" + "0" * 32, "algorithm": "disassociation",
                "parameters": {**params, "seed": None}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    args = ["verify", "--release", str(folder), "--original", str(source)]
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["holds"] is True
    line = ok.stderr.strip()
    assert line.startswith("verified: the disassociation release") and "\n" not in line
    assert "k=3" in line and "m=2" in line and "from its manifest" in line
    manifest["parameters"]["k"] = 60  # a claim the release does not meet
    (folder / "manifest.json").write_text(json.dumps(manifest))
    bad = runner.invoke(app, args)
    assert bad.exit_code == 1 and json.loads(bad.stdout)["holds"] is False
    assert bad.stderr.strip().startswith("NOT verified: the disassociation release")
    assert "k=60" in bad.stderr
    stronger = runner.invoke(app, [*args, "--param", "k=3"])  # given values win
    assert stronger.exit_code == 0, stronger.output
    wrong = runner.invoke(app, [*args, "--algorithm", "lda"])
    assert wrong.exit_code == 1 and "made by 'disassociation', not 'lda'" in wrong.output
