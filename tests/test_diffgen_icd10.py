"""DiffGen on MIMIC-shaped ICD-10-CM data: the shipped ``mimic-demo-icd10`` taxonomies run,
verify and evaluate on the ICD-10 copy of the MIMIC-III demo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from ehr_release import registry
from ehr_release.configuration.taxonomies import config_path, load_config, shipped_names
from ehr_release.core.errors import EhrReleaseError
from ehr_release.ingest import read_dataset

DEMO10 = Path(__file__).resolve().parents[1] / "examples" / "data" / "mimic3-demo-icd10"


def test_the_icd10_configuration_is_the_icd9_one_but_for_the_code_taxonomy() -> None:
    assert "mimic-demo-icd10" in shipped_names()
    nine, ten = (yaml.safe_load(config_path(n).read_text(encoding="utf-8"))
                 for n in ("mimic-demo", "mimic-demo-icd10"))
    assert {k: v for k, v in nine.items() if k != "set_valued"} == {
        k: v for k, v in ten.items() if k != "set_valued"}
    assert ten["set_valued"]["codes"] == {**nine["set_valued"]["codes"], "taxonomy": "icd10"}
    tree = load_config("mimic-demo-icd10").set_valued["codes"].tree
    assert "E11" in tree and "E11.9" not in tree  # cut at ICD-10-CM categories
    assert max(len(c) for c in tree.children.values()) <= 4


def test_diffgen_runs_verifies_and_evaluates_on_the_icd10_demo() -> None:
    data = read_dataset(DEMO10)
    assert data.code_system == "icd10"
    entry = registry.get("diffgen")
    params = entry.parse({"epsilon": "1", "h": "5", "taxonomies": "mimic-demo-icd10",
                          "eval_runs": "1", "seed": "4"})
    files = entry.anonymize(data, params, np.random.default_rng(4))
    report = entry.verify(files, data, params)
    assert report.holds, report.to_dict()
    assert files["groups.csv"].decode().splitlines()[0].split(",")[-3:] == [
        "codes", "in_hospital_death", "count"]
    utility = entry.evaluate(files, data, params, np.random.default_rng(4))
    assert "CA (%) mean of 1" in utility.metrics


def test_the_icd9_taxonomies_refuse_the_icd10_demo_by_name() -> None:
    entry = registry.get("diffgen")
    params = entry.parse({"epsilon": "1", "h": "5", "taxonomies": "mimic-demo",
                          "eval_runs": "0"})
    with pytest.raises(EhrReleaseError, match="taxonomy is icd9 but the extract is coded in "
                                              "icd10"):
        entry.anonymize(read_dataset(DEMO10), params, np.random.default_rng(0))
