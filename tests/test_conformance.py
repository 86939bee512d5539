"""One conformance suite for every registered algorithm (scikit-learn's ``check_estimator``
idea, issue 17): whatever a new algorithm is, the flow can rely on the same contract.

For each entry, on a small case of its own input kind:

1. bad parameters (an unknown name, a missing required one) are refused with
   :class:`ParameterError` naming the parameter;
2. the release is deterministic given a seed (the same bytes twice);
3. the release conforms to the closed-world schema, counts its records, passes the
   independent verifier and the attack audit, and evaluates to a utility report;
4. the verifier catches a planted violation: the release made with weak parameters
   (small k, or a large ε for DiffGen) is checked against strong ones and must fail.

A test also fails when an algorithm is registered without a case here, so a new algorithm
cannot skip the suite.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ehr_release import registry
from ehr_release.dataset import Dataset
from ehr_release.datasheet import describe_files
from ehr_release.errors import ParameterError
from ehr_release.privacy.closed_world import violations
from ehr_release.sample import CLASS_COLUMN, generate_sample, write_sample

from .conftest import SHARED_DATA

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MIMIC = SHARED_DATA / "mimic3-demo"


@dataclass(frozen=True)
class Case:
    """An algorithm's small input, the parameters it publishes with, and the weak/strong
    parameter pair whose mismatch its verifier must catch."""

    dataset: Callable[[Path], Dataset]
    params: Callable[[Path], dict[str, str]]
    weak: dict[str, str]
    strong: dict[str, str]
    required: str  # a required parameter, removed to check the refusal
    seeded: bool = True
    extra: dict[str, str] = field(default_factory=dict)


def _wide(_tmp: Path) -> Dataset:
    return generate_sample(150, seed=11)


def _longitudinal(_tmp: Path) -> Dataset:
    return generate_sample(120, seed=5, longitudinal=True)


def _mimic(_tmp: Path) -> Dataset:
    if not MIMIC.is_dir():
        pytest.skip(f"needs the MIMIC-III demo in {SHARED_DATA}")
    from ehr_release.ingest import read_dataset

    return read_dataset(MIMIC)


def _gccens_sample(tmp: Path) -> Dataset:
    population = generate_sample(300, seed=13)
    write_sample(population, tmp / "population.csv")
    keep = set(population.patient_ids[:120])
    diagnoses = population.diagnoses
    return Dataset(population.patients.loc[sorted(keep)],
                   diagnoses[diagnoses["patient_id"].isin(keep)].reset_index(drop=True),
                   source="first 120 patients of the population")


def _artuc_params(_tmp: Path) -> dict[str, str]:
    return {"config": str(EXAMPLES / "artuc-mimic" / "config.yaml"), "delta": "0.4",
            "m": "2"}


def _artuc_case() -> Case:
    # The configuration carries defaults (k among them): it is what is required.
    return Case(_mimic, _artuc_params, weak={"k": "2"}, strong={"k": "25"},
                required="config")


CASES: dict[str, Case] = {
    "disassociation": Case(_wide, lambda _t: {"m": "2"}, weak={"k": "2"},
                           strong={"k": "40"}, required="k"),
    "artuc": _artuc_case(),
    "artuc-baseline": _artuc_case(),
    "rmr": _artuc_case(),
    "artuc-unconstrained": _artuc_case(),
    "gccens": Case(_gccens_sample, lambda t: {"population": str(t / "population.csv")},
                   weak={"k": "2"}, strong={"k": "60"}, required="k", seeded=False),
    "lda": Case(_longitudinal, lambda _t: {}, weak={"k": "2"}, strong={"k": "40"},
                required="k", seeded=False),
    "lda-baseline": Case(_longitudinal, lambda _t: {}, weak={"k": "2"}, strong={"k": "40"},
                         required="k", seeded=False),
    "diffgen": Case(lambda _t: generate_sample(2000, seed=3),
                    lambda _t: {"h": "3", "taxonomies": "mimic-demo", "eval_runs": "1",
                                "predictors": "age,gender,insurance,codes"},
                    weak={"epsilon": "1000"}, strong={"epsilon": "0.05"},
                    required="epsilon", extra={}),
}


def test_every_registered_algorithm_has_a_conformance_case() -> None:
    assert set(registry.names()) <= set(CASES), set(registry.names()) - set(CASES)


def _params(case: Case, tmp: Path, which: dict[str, str], seed: int | None) -> dict[str, str]:
    given = {**case.params(tmp), **which}
    if case.seeded and seed is not None:
        given["seed"] = str(seed)
    return given


def _release(name: str, case: Case, tmp: Path, which: dict[str, str],
             seed: int | None = 7) -> tuple[dict[str, bytes], dict[str, Any], Dataset]:
    entry = registry.get(name)
    dataset = case.dataset(tmp)
    if name == "diffgen":
        dataset = Dataset(dataset.patients, dataset.diagnoses, class_column=CLASS_COLUMN,
                          source=dataset.source, code_system=dataset.code_system)
    params = entry.parse(_params(case, tmp, which, seed))
    return entry.anonymize(dataset, params, np.random.default_rng(seed)), params, dataset


@pytest.fixture(params=sorted(CASES))
def name(request: pytest.FixtureRequest) -> str:
    if request.param not in registry.names():
        pytest.skip(f"{request.param} is not registered")
    return request.param


def test_bad_parameters_are_refused_naming_the_parameter(name: str, tmp_path: Path) -> None:
    case, entry = CASES[name], registry.get(name)
    given = _params(case, tmp_path, case.weak, None)
    with pytest.raises(ParameterError) as unknown:
        entry.parse({**given, "no_such_parameter": "1"})
    assert unknown.value.parameter == "no_such_parameter"
    without = {k: v for k, v in given.items() if k != case.required}
    with pytest.raises(ParameterError) as missing:
        entry.parse(without)
    assert missing.value.parameter == case.required


def test_release_is_deterministic_given_a_seed(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    first, _, _ = _release(name, case, tmp_path, case.weak)
    second, _, _ = _release(name, case, tmp_path, case.weak)
    assert first == second


def test_release_conforms_verifies_survives_the_attack_and_evaluates(
        name: str, tmp_path: Path) -> None:
    case, entry = CASES[name], registry.get(name)
    files, params, dataset = _release(name, case, tmp_path, case.weak)
    assert entry.schema is not None and list(violations(files, entry.schema)) == []
    # The recipient's datasheet reviews every column this release has, derived ones too.
    unreviewed = [(f.name, r.path) for f in describe_files(files, entry.schema)
                  for r in f.fields if not r.review]
    assert unreviewed == []
    assert entry.count_records is not None and entry.count_records(files) > 0
    report = entry.verify(files, dataset, params)
    assert report.holds, [r.name for r in report.failures]
    assert entry.attack is not None and entry.attack(files, dataset, params).passed
    utility = entry.evaluate(files, dataset, params, np.random.default_rng(1))
    assert utility.algorithm and utility.metrics


def test_verifier_catches_a_planted_violation(name: str, tmp_path: Path) -> None:
    """The weak release, checked against the strong claim: the verifier must refuse it."""
    case, entry = CASES[name], registry.get(name)
    files, _, dataset = _release(name, case, tmp_path, case.weak)
    strong = entry.parse(_params(case, tmp_path, case.strong, 7))
    assert not entry.verify(files, dataset, strong).holds


#: Every algorithm family's verifier, attack and evaluation modules (issue 17: one plug-in
#: shape, the same entry point names and leading parameters in each).
FAMILIES = ("disassociation", "kkm", "gccens", "lda", "diffgen")
EVALUATIONS = ("disassociation", "artuc", "gccens", "lda", "diffgen")


def _leading(module: str, name: str) -> list[str]:
    import importlib
    import inspect

    fn = getattr(importlib.import_module(module), name)
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_has_the_one_verifier_and_attack_shape(family: str) -> None:
    assert _leading(f"ehr_release.privacy.{family}", "verify") == ["files", "original", "params"]
    assert _leading(f"ehr_release.privacy.attacks.{family}", "attack") == [
        "files", "original", "params"]


@pytest.mark.parametrize("family", EVALUATIONS)
def test_every_family_evaluation_has_the_one_shape(family: str) -> None:
    assert _leading(f"ehr_release.utility.{family}", "evaluate") == [
        "files", "original", "params", "rng"]


# --------------------------------------------------------------------------- ICD-10-CM
#: Every algorithm again on an ICD-10-CM extract (issue 35): the same generator over the
#: ICD-10-CM hierarchy, and configurations that name it (``codes: {hierarchy: icd10}``,
#: ``taxonomy: icd10``). Policies, code trees, taxonomies, verifiers and attacks must take
#: the extract's hierarchy, not the ICD-9-CM one.
ICD10 = "icd10"


def _artuc_icd10_params(tmp: Path) -> dict[str, str]:
    folder = tmp / "artuc-icd10"
    if not folder.is_dir():
        folder.mkdir()
        source = EXAMPLES / "artuc-mimic"
        (folder / "ethnicity.csv").write_bytes((source / "ethnicity.csv").read_bytes())
        text = (source / "config.yaml").read_text(encoding="utf-8")
        assert "hierarchy: icd9" in text
        (folder / "config.yaml").write_text(text.replace("hierarchy: icd9", "hierarchy: icd10"),
                                            encoding="utf-8")
    return {"config": str(folder / "config.yaml"), "delta": "0.4", "m": "2"}


def _diffgen_icd10_params(tmp: Path) -> dict[str, str]:
    from ehr_release.configuration.taxonomies import config_path

    path = tmp / "mimic-icd10.yaml"
    text = config_path("mimic-demo").read_text(encoding="utf-8")
    assert "taxonomy: icd9" in text
    path.write_text(text.replace("taxonomy: icd9", "taxonomy: icd10"), encoding="utf-8")
    return {"h": "3", "taxonomies": str(path), "eval_runs": "1",
            "predictors": "age,gender,insurance,codes"}


def _gccens_icd10(tmp: Path) -> Dataset:
    population = generate_sample(300, seed=13, code_system=ICD10)
    write_sample(population, tmp / "population.csv")
    keep = set(population.patient_ids[:120])
    diagnoses = population.diagnoses
    return Dataset(population.patients.loc[sorted(keep)],
                   diagnoses[diagnoses["patient_id"].isin(keep)].reset_index(drop=True),
                   source="first 120 patients of the population", code_system=ICD10)


def _artuc_icd10_case() -> Case:
    return Case(lambda _t: generate_sample(150, seed=11, code_system=ICD10),
                _artuc_icd10_params, weak={"k": "2"}, strong={"k": "40"}, required="config")


ICD10_CASES: dict[str, Case] = {
    "disassociation": Case(lambda _t: generate_sample(150, seed=11, code_system=ICD10),
                           lambda _t: {"m": "2"}, weak={"k": "2"}, strong={"k": "40"},
                           required="k"),
    "artuc": _artuc_icd10_case(),
    "artuc-baseline": _artuc_icd10_case(),
    "rmr": _artuc_icd10_case(),
    "artuc-unconstrained": _artuc_icd10_case(),
    "gccens": Case(_gccens_icd10, lambda t: {"population": str(t / "population.csv")},
                   weak={"k": "2"}, strong={"k": "60"}, required="k", seeded=False),
    "lda": Case(lambda _t: generate_sample(120, seed=5, longitudinal=True, code_system=ICD10),
                lambda _t: {}, weak={"k": "2"}, strong={"k": "40"}, required="k",
                seeded=False),
    "lda-baseline": Case(lambda _t: generate_sample(120, seed=5, longitudinal=True,
                                                    code_system=ICD10),
                         lambda _t: {}, weak={"k": "2"}, strong={"k": "40"}, required="k",
                         seeded=False),
    "diffgen": Case(lambda _t: generate_sample(2000, seed=3, code_system=ICD10),
                    _diffgen_icd10_params, weak={"epsilon": "1000"},
                    strong={"epsilon": "0.05"}, required="epsilon"),
}


def test_every_registered_algorithm_has_an_icd10_case() -> None:
    assert set(registry.names()) <= set(ICD10_CASES), set(registry.names()) - set(ICD10_CASES)


@pytest.fixture(params=sorted(ICD10_CASES))
def icd10_name(request: pytest.FixtureRequest) -> str:
    if request.param not in registry.names():
        pytest.skip(f"{request.param} is not registered")
    return request.param


def test_icd10_release_conforms_verifies_survives_the_attack_and_evaluates(
        icd10_name: str, tmp_path: Path) -> None:
    case, entry = ICD10_CASES[icd10_name], registry.get(icd10_name)
    files, params, dataset = _release(icd10_name, case, tmp_path, case.weak)
    assert dataset.code_system == ICD10
    assert entry.schema is not None and list(violations(files, entry.schema)) == []
    assert entry.count_records is not None and entry.count_records(files) > 0
    report = entry.verify(files, dataset, params)
    assert report.holds, [(r.name, r.measured) for r in report.failures]
    assert entry.attack is not None and entry.attack(files, dataset, params).passed
    utility = entry.evaluate(files, dataset, params, np.random.default_rng(1))
    assert utility.algorithm and utility.metrics


def test_icd10_verifier_catches_a_planted_violation(icd10_name: str, tmp_path: Path) -> None:
    case, entry = ICD10_CASES[icd10_name], registry.get(icd10_name)
    files, _, dataset = _release(icd10_name, case, tmp_path, case.weak)
    strong = entry.parse(_params(case, tmp_path, case.strong, 7))
    assert not entry.verify(files, dataset, strong).holds


@pytest.mark.parametrize("name", ["artuc", "diffgen"])
def test_a_configuration_for_the_other_code_system_is_refused(name: str,
                                                              tmp_path: Path) -> None:
    """An ICD-9 configuration on an ICD-10 extract names the cause, not every code."""
    from ehr_release.errors import ConfigError

    case, entry = CASES[name], registry.get(name)
    dataset = ICD10_CASES[name].dataset(tmp_path)
    if name == "diffgen":
        dataset = Dataset(dataset.patients, dataset.diagnoses, class_column=CLASS_COLUMN,
                          code_system=ICD10)
    params = entry.parse(_params(case, tmp_path, case.weak, 7))
    with pytest.raises(ConfigError, match="coded in"):
        entry.anonymize(dataset, params, np.random.default_rng(7))
