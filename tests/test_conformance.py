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
                          source=dataset.source)
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
