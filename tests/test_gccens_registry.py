"""``gccens`` through the registry: parameters, the population file, bad inputs, MIMIC."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ehr_release import registry
from ehr_release.configuration.caps import parse_caps
from ehr_release.core.errors import InputError, ParameterError
from ehr_release.model.dataset import Dataset
from ehr_release.samples.sample import write_sample

from .conftest import SHARED_DATA

MIMIC = SHARED_DATA / "mimic3-demo"
POPULATION = [["250", "250", "272"], ["250", "272"], ["250"], ["401"], ["272", "272", "724"],
              ["250"], ["272", "724"]]


@pytest.fixture
def population_file(tmp_path: Path) -> Path:
    ids = [f"p{i}" for i in range(1, 8)]
    return write_sample(Dataset.from_records(POPULATION, patient_ids=ids),
                        tmp_path / "population.csv")


def _sample(ids: list[str]) -> Dataset:
    records = [POPULATION[int(i[1:]) - 1] for i in ids]
    return Dataset.from_records(records, patient_ids=ids)


@pytest.mark.parametrize("text, caps", [
    ("max", {}), ("", {}), ("3", {"*": 3}),
    ("250:2, 272:2,401:0,724:1", {"250": 2, "272": 2, "401": 0, "724": 1}),
    ("25000:1,*:0", {"250.00": 1, "*": 0}),
])
def test_caps_parameter(text, caps):
    assert parse_caps(text) == caps


@pytest.mark.parametrize("text", ["-1", "250:-2", "250:2,250:1", "250=2", "250:x"])
def test_bad_caps_are_refused_with_the_rule(text, population_file):
    entry = registry.get("gccens")
    with pytest.raises(ParameterError, match="'caps'"):
        entry.parse({"k": "2", "population": str(population_file), "caps": text})


def test_missing_population_is_a_parameter_error(tmp_path):
    with pytest.raises(ParameterError, match="existing dataset"):
        registry.get("gccens").parse({"k": "2", "population": str(tmp_path / "nope.csv")})


def test_worked_example_through_the_registry(population_file):
    entry = registry.get("gccens")
    params = entry.parse({"k": "2", "population": str(population_file),
                          "caps": "250:2,272:2,401:0,724:1"})
    sample = _sample(["p6", "p5", "p1"])  # {250}, {272,272,724}, {250,250,272}
    files = entry.anonymize(sample, params, None)
    lines = [json.loads(x) for x in files["censored.jsonl"].decode().splitlines()]
    assert lines == [{"patient_id": "p1", "codes": {"250": 1, "272": 1}},  # by patient_id
                     {"patient_id": "p5", "codes": {"272": 1, "724": 1}},
                     {"patient_id": "p6", "codes": {"250": 1}}]
    meta = json.loads(files["censoring.json"])
    assert meta["caps"] == {"250": 2, "272": 2, "401": 0, "724": 1}  # the policy, as declared
    assert "final_caps" not in meta and "initial_caps" not in meta  # sample-derived: issue 14
    assert meta["population"]["records"] == 7
    report = entry.verify(files, sample, params)
    assert report.holds, report.failures
    utility = entry.evaluate(files, sample, params, None)
    assert utility.metrics["CUL mean"] == pytest.approx(2 / 9)
    assert utility.metrics["CUL median"] == pytest.approx(1 / 3)
    assert utility.metrics["share below k before"] == pytest.approx(2 / 3)
    assert utility.metrics["share below k after"] == 0.0
    assert utility.charts and utility.charts[0].png.startswith(b"\x89PNG")


def test_sample_patient_missing_from_population(population_file):
    entry = registry.get("gccens")
    params = entry.parse({"k": "2", "population": str(population_file)})
    stranger = Dataset.from_records([["250"]], patient_ids=["q1"])
    with pytest.raises(InputError, match="not in the population.*'q1'") as err:
        entry.anonymize(stranger, params, None)
    assert "q1" not in err.value.public()  # the audit trail never holds a patient id
    inconsistent = Dataset.from_records([["250", "250", "250"]], patient_ids=["p3"])
    with pytest.raises(InputError, match="drawn from the population") as err:
        entry.anonymize(inconsistent, params, None)
    assert "p3" not in err.value.public() and "250" not in err.value.public()


def test_mimic_demo_as_its_own_population():
    if not MIMIC.exists():
        pytest.skip(f"MIMIC-III demo not found at {MIMIC}")
    entry = registry.get("gccens")
    params = entry.parse({"k": "5", "population": str(MIMIC),
                          "caps": "401.9:2,428.0:2,427.31:2,584.9:2,*:0"})
    from ehr_release.ingest.readers import read_dataset

    sample = read_dataset(MIMIC)
    files = entry.anonymize(sample, params, None)
    report = entry.verify(files, sample, params)
    assert report.holds, report.failures
    records = [json.loads(x) for x in files["censored.jsonl"].decode().splitlines()]
    assert len(records) == sample.n_patients
    assert {c for r in records for c in r["codes"]} <= {"401.9", "428.0", "427.31", "584.9"}
    utility = entry.evaluate(files, sample, params, None)
    assert utility.metrics["share below k after"] == 0.0
