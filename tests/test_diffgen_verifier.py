"""The ledger verifier accepts honest releases and catches each kind of budget mistake.

Each test tampers with one thing an anonymizer bug could get wrong -- a missing charge, a
wrong scope, too little noise, an overspent total, a value outside the public domain -- and
checks that the matching requirement, and only a failing verdict, comes out.
"""

from __future__ import annotations

import ast
import io
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ehr_release.algorithms.diffgen import (
    DiffGenParams,
    encode_dataset,
    noise_source,
    run_diffgen,
)
from ehr_release.algorithms.diffgen.release import release_files
from ehr_release.configuration.taxonomies import load_config
from ehr_release.model.dataset import Dataset
from ehr_release.privacy import diffgen as verifier
from tests.test_diffgen_table1 import TABLE1, table1_config_path, table1_dataset

H = 6


def _bigger_table1() -> Dataset:
    """Table 1 repeated 15 times with shifted ages: enough records for every step kind."""
    rows = [(i * 8 + r[0], r[1], min(65, r[2] + i), r[3], r[4])
            for i in range(15) for r in TABLE1]
    return table1_dataset(rows)


@pytest.fixture
def release(tmp_path: Path):
    path = table1_config_path(tmp_path)
    config = load_config(str(path))
    data = _bigger_table1()
    params = DiffGenParams(Fraction(1), H)
    result = run_diffgen(encode_dataset(data, config), params,
                         noise_source(5, np.random.default_rng(5)))
    files = release_files(result, config, params)
    vparams = {"epsilon": 1.0, "h": H, "taxonomies": str(path), "seed": 5}
    return files, data, vparams


def _failed(files, data, params) -> set[str]:
    report = verifier.verify(files, data, params)
    return {r.name for r in report.failures}


def _with_ledger(files, change):
    ledger = json.loads(files["ledger.json"])
    change(ledger)
    return {**files, "ledger.json": json.dumps(ledger).encode()}


def _phases(files) -> list[str]:
    return [c["phase"] for c in json.loads(files["ledger.json"])["charges"]]


def test_honest_release_holds_and_exercises_every_step_kind(release) -> None:
    files, data, params = release
    report = verifier.verify(files, data, params)
    assert report.holds, report.to_dict()
    phases = _phases(files)
    kinds = {c["detail"].get("kind") for c in json.loads(files["ledger.json"])["charges"]
             if c["phase"] == "selection"}
    assert {"initial-split", "selection", "split", "emptiness", "final-counts"} <= set(phases)
    assert kinds == {"categorical", "numerical", "set-valued"}


@pytest.mark.parametrize("phase", ["split", "emptiness", "selection", "initial-split"])
def test_a_missing_charge_fails(release, phase) -> None:
    files, data, params = release

    def drop(ledger):
        i = next(i for i, c in enumerate(ledger["charges"]) if c["phase"] == phase)
        del ledger["charges"][i]
    assert "charges complete and scoped" in _failed(_with_ledger(files, drop), data, params)


def test_a_selection_claimed_parallel_fails(release) -> None:
    files, data, params = release

    def mis_scope(ledger):
        for c in ledger["charges"]:
            if c["phase"] == "selection":
                c["scope"], c["group"] = "parallel", "all selections"
    failed = _failed(_with_ledger(files, mis_scope), data, params)
    assert "charges complete and scoped" in failed


def test_parallel_group_spanning_two_steps_fails(release) -> None:
    files, data, params = release

    def merge(ledger):
        for c in ledger["charges"]:
            if c["phase"] == "split":
                c["group"] = "every split"
    failed = _failed(_with_ledger(files, merge), data, params)
    assert "charges complete and scoped" in failed


def test_noise_smaller_than_charged_fails(release) -> None:
    files, data, params = release

    def shrink(ledger):
        ledger["charges"][-1]["scale"] /= 2
    # the scale no longer matches its ε either (the ledger's bookkeeping)
    assert _failed(_with_ledger(files, shrink), data, params) == {"noise calibrated",
                                                                   "ledger text fixed"}


def test_overspent_total_fails(release) -> None:
    files, data, params = release

    def overspend(ledger):
        final = ledger["charges"][-1]
        final["epsilon"] = str(Fraction(final["epsilon"]) * 2)
        final["scale"] /= 2
        ledger["spent"] = str(Fraction(ledger["spent"]) + Fraction(final["epsilon"]) / 2)
    failed = _failed(_with_ledger(files, overspend), data, params)
    assert {"ε composition", "charges complete and scoped"} <= failed


def test_declared_total_must_match_the_recomputed_one(release) -> None:
    files, data, params = release

    def understate(ledger):
        ledger["spent"] = "1/2"
    assert _failed(_with_ledger(files, understate), data, params) == {"ε composition"}


def test_verifying_with_other_parameters_fails(release) -> None:
    files, data, params = release
    failed = _failed(files, data, {**params, "h": H - 1})
    assert {"parameters", "ε' derivation", "charges complete and scoped"} <= failed


def test_a_released_value_outside_the_public_configuration_fails(release) -> None:
    files, data, params = release
    frame = pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str)
    frame["sex"] = "Ghost"  # a value no taxonomy declares
    tampered = {**files, "groups.csv": frame.to_csv(index=False).encode()}
    # the cut's groups are then missing too (issue 14's completeness check)
    assert "released values public" in _failed(tampered, data, params)


def test_negative_counts_fail(release) -> None:
    files, data, params = release
    frame = pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str)
    frame.loc[0, "count"] = "-3"
    tampered = {**files, "groups.csv": frame.to_csv(index=False).encode()}
    assert _failed(tampered, data, params) == {"released values public"}


def test_original_data_outside_the_domain_is_reported(release) -> None:
    files, data, params = release
    patients = data.patients.copy()
    patients.iloc[0, patients.columns.get_loc("age")] = 70  # domain is [18, 66)
    moved = Dataset(patients, data.diagnoses, class_column=data.class_column)
    assert _failed(files, moved, params) == {"domains cover the data"}


def test_the_verifier_imports_nothing_from_the_algorithm() -> None:
    source = Path(verifier.__file__).read_text()
    modules = {n.module for n in ast.walk(ast.parse(source))
               if isinstance(n, ast.ImportFrom) and n.module}
    modules |= {a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import)
                for a in n.names}
    assert not any(m.startswith("ehr_release.algorithms") for m in modules), modules
