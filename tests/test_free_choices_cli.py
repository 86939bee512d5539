"""Issue 32 through ``ehr-release verify``: a release folder written by hand — canonical
bytes, the model still holds — whose free choices carry a hidden per-patient value exits 1.

The attacks of the issue: GCCens lines over-censored on lines chosen by a hidden bit (k-map
kept), and disassociation chunks aligned so that position i of every record chunk is the
same true patient. The honest folder of each exits 0, so the refusal is the replay's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from ehr_release import registry
from ehr_release.cli import app
from ehr_release.model.dataset import Dataset
from ehr_release.release.verification import anonymize_as_released
from ehr_release.samples.sample import generate_sample, write_sample

runner = CliRunner()
RID = "free-choices-cli"


def _verify(folder: Path, original: Path, *params: str) -> tuple[int, dict]:
    args = ["verify", "--algorithm", folder.name, "--release", str(folder), "--original",
            str(original), "--release-id", RID]
    for p in params:
        args += ["--param", p]
    result = runner.invoke(app, args)
    return result.exit_code, json.loads(result.stdout)


def _failed(report: dict) -> list[str]:
    return [r["name"] for r in report["requirements"] if not r["passed"]]


def _write(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def test_gccens_over_censoring_on_a_hidden_bit_exits_1(ehr_home: Path, tmp_path: Path) -> None:
    population = generate_sample(200, seed=13)
    write_sample(population, tmp_path / "population.csv")
    keep = set(population.patient_ids[:80])
    diagnoses = population.diagnoses
    sample = Dataset(population.patients.loc[sorted(keep)],
                     diagnoses[diagnoses["patient_id"].isin(keep)].reset_index(drop=True))
    write_sample(sample, tmp_path / "sample.csv")
    entry = registry.get("gccens")
    params = {"k": "2", "population": str(tmp_path / "population.csv")}
    files = anonymize_as_released(entry, sample, entry.parse(params), None, RID)
    honest = _write(tmp_path / "honest" / "gccens", files)
    code, report = _verify(honest, tmp_path / "sample.csv", *(f"{k}={v}" for k, v in
                                                              params.items()))
    assert code == 0, _failed(report)
    lines = [json.loads(x) for x in files["censored.jsonl"].decode().splitlines()]
    for line in lines:  # one instance more off the lines whose pseudonym's last bit is 1
        if line["codes"] and int(line["patient_id"][-1], 16) & 1:
            first = min(line["codes"])
            line["codes"][first] -= 1
            line["codes"] = {c: n for c, n in line["codes"].items() if n}
    planted = _write(tmp_path / "planted" / "gccens", {**files, "censored.jsonl": "".join(
        json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()})
    code, report = _verify(planted, tmp_path / "sample.csv", *(f"{k}={v}" for k, v in
                                                               params.items()))
    assert code == 1 and _failed(report) == ["censoring replayed"]


def test_disassociation_chunks_aligned_on_the_true_patient_exit_1(ehr_home: Path,
                                                                  tmp_path: Path) -> None:
    from ehr_release.algorithms.disassociation import disassociate_dataset
    from ehr_release.configuration.policies import resolve_policy

    from .disassociation_layout import files_of, read_doc

    dataset = generate_sample(150, seed=11)
    write_sample(dataset, tmp_path / "data.csv")
    entry = registry.get("disassociation")
    params = entry.parse({"k": "2", "m": "2"})
    result = disassociate_dataset(dataset, 2, 2, resolve_policy(params["policy"], dataset),
                                  np.random.default_rng(0))
    honest = _write(tmp_path / "honest" / "disassociation",
                    {"release.parquet": result.release.to_bytes()})
    code, report = _verify(honest, tmp_path / "data.csv", "k=2", "m=2")
    assert code == 0, _failed(report)
    doc, sets = read_doc(result.release.to_bytes()), dataset.code_sets()
    for cluster, members in zip(doc["clusters"], result.clusters, strict=True):
        for n, chunk in enumerate(cluster["record_chunks"]):
            domain = {c for sub in chunk for c in sub}
            cluster["record_chunks"][n] = [sorted(sets[i] & domain) for i in members.tolist()]
    planted = _write(tmp_path / "planted" / "disassociation", files_of(doc))
    code, report = _verify(planted, tmp_path / "data.csv", "k=2", "m=2")
    assert code == 1 and "subrecord order" in _failed(report)
