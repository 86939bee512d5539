"""Configuration of ArtUC: hierarchies, domains, constraint templates, and clear refusals."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from ehr_release.configuration.constraints import (
    Interval,
    assign_parts,
    code_set_index,
    load_config,
    parse_config,
    rt_data,
    with_weights,
)
from ehr_release.core.errors import ConfigError, InputError, ParameterError
from ehr_release.model.dataset import Dataset
from ehr_release.model.hierarchy import icd9_hierarchy

ATTRS = {"age": {"type": "numerical", "domain": [0, 100]},
         "sex": {"type": "categorical", "hierarchy": {"All": ["F", "M"]}}}


def cfg(constraints, attributes=ATTRS):
    return parse_config({"attributes": attributes, "constraints": constraints},
                        lambda ref: icd9_hierarchy())


def test_hierarchy_files_csv_and_yaml_tree_relative_to_the_config(tmp_path) -> None:
    (tmp_path / "origin.csv").write_text("child,parent\nEurope,All\nAfrica,All\nFrance,Europe\n"
                                         "Ghana,Africa\n")
    (tmp_path / "sex.yaml").write_text("All: [F, M]\n")
    (tmp_path / "c.yaml").write_text(
        "attributes:\n"
        "  origin: {type: categorical, hierarchy: origin.csv, weight: 0.5}\n"
        "  sex: {type: categorical, hierarchy: sex.yaml, weight: 0.5}\n"
        "constraints:\n  - {origin: Europe, codes: all}\n  - {origin: Africa, codes: all}\n")
    config = load_config(tmp_path / "c.yaml")
    origin = config.attributes[0].hierarchy
    assert origin.root == "All" and origin.parent["France"] == "Europe"
    assert [u.demographics for u in config.constraints] == [("Europe", "All"), ("Africa", "All")]
    (tmp_path / "bad.csv").write_text("child,parent\nA,All\nA,B\nB,All\n")
    (tmp_path / "c2.yaml").write_text("attributes:\n  o: {type: categorical, hierarchy: bad.csv}\n")
    with pytest.raises(ConfigError, match="'A' has more than one parent"):
        load_config(tmp_path / "c2.yaml")


def test_templates_expand_to_the_product_with_readable_names() -> None:
    config = cfg([{"name": "UC1", "age": {"bands": 12, "from": 0, "to": 30}, "sex": "All",
                   "codes": "chapters"}])
    assert len(config.constraints) == 3 * 19
    first = config.constraints[0]
    assert first.name == "UC1[age=[0, 11], codes=001-139]"
    assert [u.demographics[0] for u in config.constraints[::19]] == [
        Interval(0, 11), Interval(12, 23), Interval(24, 30)]
    assert "053.20" in first.codes.codes and "053" in first.codes.codes
    sets = config.code_sets()
    assert len(sets) == 19 and sum(len(s.codes) for s in sets) == len(icd9_hierarchy().parent)


def test_code_lists_patterns_and_levels() -> None:
    config = cfg([{"age": [0, 100], "sex": {"level": 1}, "codes": ["053.*", "250.00"]}])
    assert [u.demographics[1] for u in config.constraints] == ["F", "M"]
    codes = config.constraints[0].codes.codes
    assert {"053", "053.2", "053.20", "250.00"} <= codes and "250.01" not in codes
    with pytest.raises(ConfigError, match="quote ICD-9 codes"):
        cfg([{"codes": [53.2]}])
    with pytest.raises(ConfigError, match="'Europe' is not a node"):
        cfg([{"sex": "Europe", "codes": "all"}])
    with pytest.raises(ConfigError, match="unknown code family 'blocks'"):
        cfg([{"codes": "blocks"}])
    with pytest.raises(ConfigError, match="'height' is not a configured attribute"):
        cfg([{"height": 3, "codes": "all"}])


def test_paper_table_4_is_consistent_and_overlaps_are_refused_with_names() -> None:
    from tests.test_artuc_worked_example import worked_example

    _, config = worked_example()  # u1 has origin All, u4 Africa: apart by age, so consistent
    assert len(config.demographic_parts()) == 2
    with pytest.raises(ConfigError, match=r"u1 and u2 .*age \[0, 50\] vs \[40, 60\]"):
        cfg([{"name": "u1", "age": [0, 50], "codes": ["001"]},
             {"name": "u2", "age": [40, 60], "codes": ["002"]}])
    with pytest.raises(ConfigError, match=r"a and b .*sex 'All' vs 'F'"):
        cfg([{"name": "a", "age": [0, 50], "sex": "All", "codes": ["001"]},
             {"name": "b", "age": [0, 50], "sex": "F", "codes": ["002"]}])
    with pytest.raises(ConfigError, match=r"x and y .*share 001 but are not equal"):
        cfg([{"name": "x", "age": [0, 50], "codes": ["001", "002"]},
             {"name": "y", "age": [51, 100], "codes": ["001"]}])


def _dataset(rows):
    demo = pd.DataFrame([r[:2] for r in rows], columns=["age", "sex"])
    return Dataset.from_records([r[2] for r in rows], demo)


def test_non_covering_constraints_name_the_record_and_the_codes() -> None:
    config = cfg([{"name": "young", "age": [0, 49], "sex": "F", "codes": ["001"]},
                  {"name": "old", "age": [50, 100], "sex": "M", "codes": ["002"]}])
    data = rt_data(_dataset([(30, "F", ["001"]), (30, "M", ["002"])]), config)
    with pytest.raises(ConfigError, match=r"patient in row 2: each value is covered, but no "
                                          r"single constraint combines them \(age=30, "
                                          r"sex='M'\)") as caught:
        assign_parts(data, config)
    assert "age=30" not in caught.value.public()  # the stored message names no value
    with pytest.raises(ConfigError, match=r"do not cover some codes of the data.*\(003, 004\)"
                       ) as caught:
        code_set_index(config, ["001", "003", "004"])
    assert "003" not in caught.value.public()  # the extract's codes are not stored either
    narrow = cfg([{"age": [0, 49], "codes": "all"}])
    with pytest.raises(ConfigError, match="no constraint covers age"):
        assign_parts(rt_data(_dataset([(70, "F", [])]), narrow), narrow)


def test_data_outside_the_configuration_is_refused() -> None:
    config = cfg([{"codes": "all"}])
    with pytest.raises(InputError, match="outside the configured domain"):
        rt_data(_dataset([(130, "F", [])]), config)
    with pytest.raises(InputError, match=r"row 1, column 'sex': value is not a node .*'X'"):
        rt_data(_dataset([(30, "X", [])]), config)
    other = parse_config({"attributes": {"height": {"type": "numerical", "domain": [0, 3]}}},
                         lambda ref: icd9_hierarchy())
    with pytest.raises(ConfigError, match="'height' is not a column"):
        rt_data(_dataset([(30, "F", [])]), other)


def test_weights_from_config_and_parameter() -> None:
    attrs = {"age": {**ATTRS["age"], "weight": 0.7}, "sex": {**ATTRS["sex"], "weight": 0.3}}
    config = cfg([], attrs)
    assert [a.weight for a in config.attributes] == [0.7, 0.3]
    assert [a.weight for a in cfg([]).attributes] == [0.5, 0.5]
    with pytest.raises(ConfigError, match="must sum to 1; got age=0.7, sex=0.7"):
        cfg([], {"age": {**ATTRS["age"], "weight": 0.7}, "sex": {**ATTRS["sex"], "weight": 0.7}})
    assert [a.weight for a in with_weights(config, "age=0.25, sex=0.75").attributes] == [
        0.25, 0.75]
    for bad in ("age=0.5", "age=0.5,sex=0.6", "age=x,sex=1", "age=0.5,height=0.5"):
        with pytest.raises(ParameterError, match="weights"):
            with_weights(config, bad)


def test_a_configuration_carries_the_parameters_it_was_written_for(tmp_path) -> None:
    """The MIMIC example's config publishes with its own defaults; --param still wins."""
    from pathlib import Path

    from ehr_release.core.errors import ConfigError
    from ehr_release.registry import get

    config = Path(__file__).resolve().parents[1] / "examples/artuc-mimic/config.yaml"
    for name in ("artuc", "rmr", "artuc-baseline", "artuc-unconstrained"):
        parsed = get(name).parse({"config": str(config)})
        assert (parsed["k"], parsed["delta"], parsed["epsilon"]) == (5, 0.3, "6%"), name
    assert get("artuc").parse({"config": str(config), "k": "7"})["k"] == 7
    bad = tmp_path / "bad.yaml"
    bad.write_text(config.read_text().replace("  k: 5\n", "  seed: 5\n"))
    with pytest.raises(ConfigError, match="'defaults' must map some of k, m, delta"):
        get("artuc").parse({"config": str(bad)})


@pytest.mark.parametrize(("raw", "message"), [
    ({"attributes": ATTRS, "constraint": [{"codes": "all"}]},
     "unknown key 'constraint' (known: attributes, codes, constraints, defaults)"),
    ({"attributes": {**ATTRS, "age": {"type": "numerical", "domain": [0, 100],
                                      "wieght": 0.5}}},
     "attribute 'age': unknown key 'wieght' (known: domain, hierarchy, type, weight)"),
    ({"attributes": ATTRS, "codes": {"hierachy": "icd9"}},
     "codes: unknown key 'hierachy' (known: hierarchy)"),
])
def test_a_misspelt_key_is_refused_not_silently_ignored(raw, message) -> None:
    """A typo must not quietly drop the constraints or fall back to a default weight."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config(raw, lambda ref: icd9_hierarchy(), source="c.yaml")


def test_a_value_outside_the_configuration_names_the_file_and_shows_the_value_plainly() -> None:
    """The refusal names the extract (as every input error does); the value, terminal detail
    only, is shown as the data holds it, not as a NumPy repr."""
    config = cfg([{"codes": "all"}])
    demo = pd.DataFrame({"age": [130], "sex": ["F"]})
    dataset = Dataset.from_records([[]], demo, source="extract.csv")
    with pytest.raises(InputError) as caught:
        rt_data(dataset, config)
    assert str(caught.value) == ("file extract.csv, row 1, column 'age': value is missing or "
                                 "outside the configured domain [0, 100] (found '130')")
    assert "130" not in caught.value.public()
