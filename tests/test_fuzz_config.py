"""Hostile configuration: every input loads or fails with the project's own error.

Utility policies (YAML and spec strings), ArtUC configurations (attributes, hierarchies,
constraints), DiffGen taxonomy files, ``child,parent`` hierarchy tables and every
algorithm's parameters get random structures, random text and edge values (NaN, huge,
negative, wrong types). An ``EhrReleaseError`` names the problem; anything else — a
``KeyError``, ``TypeError``, ``RecursionError`` from deep inside — is a bug.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.configuration.constraints import hierarchy_from_pairs, parse_config
from ehr_release.configuration.policies import build_policy, parse_policy_spec, parse_policy_yaml
from ehr_release.configuration.taxonomies import load_config
from ehr_release.core.errors import ConfigError, EhrReleaseError
from ehr_release.model.hierarchy import icd9_hierarchy

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

WORDS = ["age", "gender", "codes", "attributes", "constraints", "numerical", "categorical",
         "hierarchy", "icd9", "range", "domain", "class", "values", "tree", "set_valued",
         "weight", "weights", "node", "All", "401.9", "250.00", "001-139", "type", "name"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(WORDS),
    st.text(max_size=12))
structures = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.one_of(st.sampled_from(WORDS), st.text(max_size=6)), inner,
                        max_size=5)),
    max_leaves=30)


def _yaml(value) -> str:
    return yaml.safe_dump(value, allow_unicode=True)


def _only_own_errors(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except EhrReleaseError:
        return None


CODE_SETS = [{"401.9", "250.00"}, {"401.9"}, {"272.0", "250.00"}]


@FUZZ
@given(st.one_of(structures.map(_yaml), st.text(max_size=200)))
def test_policy_yaml(text: str) -> None:
    policy = _only_own_errors(parse_policy_yaml, text)
    if policy is not None:  # whatever loads is a usable, disjoint policy
        seen: set[str] = set()
        for constraint in policy.constraints:
            assert not (seen & constraint)
            seen |= constraint


@FUZZ
@given(st.one_of(st.text(max_size=40), st.sampled_from(
    ["hierarchy:3digit", "hierarchy:nope", "similar:0", "similar:-3", "similar:1e99",
     "frequent:nan", "frequent:150", "frequent:-1", "file:", "x.yaml", ":", "similar:"])))
def test_policy_spec_strings(spec: str) -> None:
    parsed = _only_own_errors(parse_policy_spec, spec)
    if parsed is not None and parsed.kind != "file":
        _only_own_errors(build_policy, parsed, CODE_SETS)


def _read_hierarchy(ref: str):
    if ref == "icd9":
        return icd9_hierarchy()
    raise ConfigError(f"unknown hierarchy {ref!r}")


@FUZZ
@given(structures)
def test_artuc_configuration(raw) -> None:
    _only_own_errors(parse_config, raw, _read_hierarchy, source="fuzz.yaml")


@FUZZ
@given(st.fixed_dictionaries({
    "attributes": st.dictionaries(st.sampled_from(["age", "gender", "zip"]), structures,
                                  min_size=1, max_size=3),
    "constraints": st.lists(structures, max_size=3)}))
def test_artuc_configuration_near_valid(raw) -> None:
    _only_own_errors(parse_config, raw, _read_hierarchy, source="fuzz.yaml")


@FUZZ
@given(st.lists(st.tuples(st.one_of(st.sampled_from(["a", "b", "c", "root"]), st.text(max_size=3)),
                          st.one_of(st.none(), st.sampled_from(["a", "b", "root"]),
                                    st.floats(allow_nan=True))), max_size=8))
def test_hierarchy_tables(pairs) -> None:
    frame = pd.DataFrame(pairs, columns=["child", "parent"]) if pairs else \
        pd.DataFrame({"child": [], "parent": []})
    _only_own_errors(hierarchy_from_pairs, frame, "fuzz.csv")


@FUZZ
@given(st.one_of(structures.map(_yaml), st.text(max_size=200)),
       st.one_of(st.none(), st.text(max_size=20), st.just("age=17:91;hours=1:100"),
                 st.just("age=91:17"), st.just("age=nan:1")),
       st.one_of(st.none(), st.text(max_size=20)))
def test_taxonomy_files(tmp_path_factory, text: str, domains, predictors) -> None:
    path = tmp_path_factory.mktemp("tax") / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    _only_own_errors(load_config, str(path), domains=domains, predictors=predictors)


EDGE_VALUES = ["", "0", "-1", "1", "2", "nan", "inf", "-inf", "1e308", "10" * 30, "0.5",
               "true", "x", "../../etc/passwd", "hierarchy:3digit", "adult", "max"]


@pytest.mark.parametrize("name", registry.names())
@FUZZ
@given(data=st.data())
def test_every_algorithms_parameters(name: str, data) -> None:
    entry = registry.get(name)
    names = [p.name for p in entry.params if p.name != "seed"]
    given_ = data.draw(st.dictionaries(
        st.one_of(st.sampled_from(names), st.text(max_size=5)),
        st.one_of(st.sampled_from(EDGE_VALUES), st.text(max_size=8),
                  st.floats(allow_nan=True), st.integers()), max_size=len(names) + 1))
    parsed = _only_own_errors(entry.parse, given_)
    if parsed is not None:
        for value in parsed.values():
            assert not (isinstance(value, float) and math.isnan(value)), parsed
