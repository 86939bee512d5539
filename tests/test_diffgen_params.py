"""Bad parameters, configurations and data are refused with one clear message each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ehr_release import registry
from ehr_release.algorithms.diffgen import encode_dataset
from ehr_release.configuration.taxonomies import load_config
from ehr_release.core.errors import ConfigError, InputError, ParameterError
from tests.test_diffgen_table1 import TABLE1, TABLE1_YAML, table1_config_path, table1_dataset


@pytest.fixture
def entry():
    return registry.get("diffgen")


@pytest.fixture
def cfg(tmp_path: Path) -> str:
    return str(table1_config_path(tmp_path))


@pytest.mark.parametrize(("name", "value"), [("epsilon", "0"), ("epsilon", "-0.5"),
                                             ("epsilon", "inf"), ("epsilon", "nan"),
                                             ("h", "0"), ("h", "-2"), ("h", "1.5"),
                                             ("score", "gini"), ("unused_budget", "keep")])
def test_bad_run_parameters_name_the_parameter(entry, cfg, name, value) -> None:
    given = {"epsilon": "1", "h": "2", "taxonomies": cfg, name: value}
    with pytest.raises(ParameterError) as info:
        entry.parse(given)
    assert info.value.parameter == name


def test_unknown_configuration_is_refused(entry) -> None:
    with pytest.raises(ParameterError, match="shipped configuration"):
        entry.parse({"epsilon": "1", "h": "2", "taxonomies": "no-such-config"})


def test_a_class_with_one_value_is_refused(entry, tmp_path) -> None:
    path = table1_config_path(tmp_path, TABLE1_YAML.replace('values: ["Y", "N"]',
                                                            'values: ["Y"]'))
    with pytest.raises(ConfigError, match="at least two"):
        entry.parse({"epsilon": "1", "h": "2", "taxonomies": str(path)})


def test_a_value_missing_from_its_taxonomy_is_refused(cfg) -> None:
    rows = [*TABLE1[:2], (3, "Other", 40, ["12"], "N")]
    with pytest.raises(InputError) as info:
        encode_dataset(table1_dataset(rows), load_config(cfg))
    assert info.value.column == "sex" and info.value.row == 3
    assert "'Other'" in str(info.value)  # on the terminal
    assert "Other" not in info.value.public()  # never in what is stored


def test_a_number_outside_its_public_domain_is_refused(cfg) -> None:
    rows = [*TABLE1[:2], (3, "Male", 66, ["12"], "N")]  # domain [18, 66)
    with pytest.raises(InputError, match=r"public domain \[18, 66\)") as info:
        encode_dataset(table1_dataset(rows), load_config(cfg))
    assert info.value.column == "age"


def test_an_undeclared_class_value_is_refused(cfg) -> None:
    rows = [*TABLE1[:2], (3, "Male", 40, ["12"], "maybe")]
    with pytest.raises(InputError, match="not declared"):
        encode_dataset(table1_dataset(rows), load_config(cfg))


def test_a_code_outside_the_set_valued_taxonomy_is_refused(cfg) -> None:
    rows = [*TABLE1[:2], (3, "Male", 40, ["31"], "N")]
    with pytest.raises(InputError, match="'31'"):
        encode_dataset(table1_dataset(rows), load_config(cfg))


def test_a_configured_column_missing_from_the_data_points_to_predictors(cfg) -> None:
    data = table1_dataset()
    data.patients.drop(columns=["sex"], inplace=True)
    with pytest.raises(InputError, match="predictors"):
        encode_dataset(data, load_config(cfg))
    assert encode_dataset(data, load_config(cfg, predictors="age,codes")).n == 8


@pytest.mark.parametrize(("domains", "predictors"), [("age=18", None), ("age=a:b", None),
                                                     (None, "age,height")])
def test_malformed_overrides_are_refused(cfg, domains, predictors) -> None:
    with pytest.raises(ParameterError):
        load_config(cfg, domains=domains, predictors=predictors)


def test_domain_override_replaces_the_configured_domain(cfg) -> None:
    dom = load_config(cfg, domains="age=0:120").numerical["age"]
    assert (dom.lo, dom.hi, dom.integer) == (0, 120, True)


@pytest.mark.parametrize(("text", "message"), [
    ("class: {column: c, values: [a, b]}\ncategorical:\n  s:\n    Any: [x, x]\n", "twice"),
    ("class: {column: c, values: [a, b]}\ncategorical:\n  s:\n    Any: [yes, no]\n",
     "quoted"),
    ("class: {column: c, values: [a, b]}\ncategorical:\n  s: {A: [x], B: [y]}\n",
     "one root"),
    ("class: {column: c, values: [a, b]}\nnumerical:\n  n: {domain: [5, 5]}\n", "empty"),
    ("class: {column: c, values: [a, b]}\nnumerical:\n  n: {domain: [0, 1.5]}\n",
     "integer"),
    ("class: {column: c, values: [a, b]}\nextra: 1\n", "unknown section"),
])
def test_malformed_configurations_are_refused(tmp_path, text, message) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(str(path))


def test_a_too_wide_set_valued_node_is_refused(tmp_path) -> None:
    leaves = ", ".join(f'"c{i}"' for i in range(17))
    text = TABLE1_YAML.split("set_valued:")[0] + (
        f"set_valued:\n  codes:\n    taxonomy:\n      Any_Code: [{leaves}]\n")
    path = table1_config_path(tmp_path, text)
    data = table1_dataset([(1, "Male", 30, ["c1"], "Y"), (2, "Female", 40, ["c2"], "N")])
    with pytest.raises(ConfigError, match="max_fanout"):
        encode_dataset(data, load_config(str(path)))
    fixed = table1_config_path(tmp_path, text + "    max_fanout: 4\n")
    assert encode_dataset(data, load_config(str(fixed))).n == 2


def test_anonymize_refuses_bad_data_through_the_registry(entry, cfg) -> None:
    params = entry.parse({"epsilon": "1", "h": "2", "taxonomies": cfg})
    rows = [*TABLE1[:2], (3, "Other", 40, ["12"], "N")]
    with pytest.raises(InputError):
        entry.anonymize(table1_dataset(rows), params, np.random.default_rng(0))
