"""Utility policies: builders, YAML files, spec strings and the overlap check."""

from __future__ import annotations

import pytest

from ehr_release.configuration.policies import (
    UtilityPolicy,
    build_policy,
    frequent_itemsets,
    frequent_policy,
    hierarchy_policy,
    parse_policy_spec,
    parse_policy_yaml,
    similarity_policy,
)
from ehr_release.core.errors import ConfigError, ParameterError
from ehr_release.model.hierarchy import icd9_hierarchy

CODES = ["296.00", "296.01", "295.04", "401.9", "401.1", "250.00"]


def _as_sets(policy: UtilityPolicy) -> set[frozenset[str]]:
    return set(policy.constraints)


@pytest.mark.parametrize("level, expected", [
    ("3digit", [{"296.00", "296.01"}, {"295.04"}, {"401.9", "401.1"}, {"250.00"}]),
    ("section", [{"296.00", "296.01", "295.04"}, {"401.9", "401.1"}, {"250.00"}]),
    ("chapter", [{"296.00", "296.01", "295.04"}, {"401.9", "401.1"}, {"250.00"}]),
])
def test_hierarchy_policies(level, expected):
    policy = hierarchy_policy(CODES, level)
    assert _as_sets(policy) == {frozenset(e) for e in expected}
    assert policy.name == f"hierarchy:{level}"


def test_hierarchy_policy_skips_unknown_codes_and_keeps_high_level_codes():
    policy = hierarchy_policy(["296.00", "XYZ", "290-319"], "3digit")
    assert _as_sets(policy) == {frozenset({"296.00"}), frozenset({"290-319"})}


def test_hierarchy_policy_rejects_unknown_level():
    with pytest.raises(ParameterError, match="hierarchy level"):
        hierarchy_policy(CODES, "leaf")


def test_similarity_policy_groups_siblings():
    codes = ["295.00", "295.01", "295.02", "295.03", "295.04", "295.05", "401.9"]
    policy = similarity_policy(codes, 5)
    assert frozenset({"295.00", "295.01", "295.02", "295.03", "295.04"}) in policy.constraints
    h = icd9_hierarchy()
    for group in policy.constraints:
        assert len(group) <= 5
        assert len({h.ancestor_at_level(c, 1) for c in group}) == 1   # one chapter
    assert set().union(*policy.constraints) == set(codes)


@pytest.mark.parametrize("n", [1, 10, 100])
def test_similarity_policy_sizes(n):
    policy = similarity_policy(CODES, n)
    assert all(len(g) <= n for g in policy.constraints)
    assert set().union(*policy.constraints) == set(CODES)
    if n == 1:
        assert len(policy) == len(CODES)


def test_similarity_policy_rejects_bad_n():
    with pytest.raises(ParameterError):
        similarity_policy(CODES, 0)


def test_frequent_itemsets_and_policy():
    records = [{"a", "b", "c"}] * 4 + [{"a", "b"}] * 3 + [{"c", "d"}] * 3
    found = frequent_itemsets(records, 3)
    assert found[frozenset({"a", "b"})] == 7
    assert found[frozenset({"a", "b", "c"})] == 4
    assert frozenset({"a", "d"}) not in found
    policy = frequent_policy(records, 30)        # ≥ 3 of 10 records
    assert policy.constraints[0] == frozenset({"a", "b", "c"})   # largest itemset first
    assert frozenset({"d"}) in policy.constraints
    codes = [c for g in policy.constraints for c in g]
    assert len(codes) == len(set(codes))                        # made disjoint
    with pytest.raises(ParameterError):
        frequent_policy(records, 0)


def test_overlapping_constraints_are_rejected_with_the_code():
    with pytest.raises(ConfigError, match=r"overlap on code '296\.00'"):
        UtilityPolicy("p", (frozenset({"296.00", "296.01"}), frozenset({"296.00"})))
    with pytest.raises(ConfigError, match="empty"):
        UtilityPolicy("p", (frozenset(),))


def test_yaml_policies_in_three_shapes():
    listed = parse_policy_yaml('- ["296.00", "296.01"]\n- ["401.9"]\n')
    named = parse_policy_yaml('depression: ["296.00", "296.01"]\nhypertension: ["401.9"]\n')
    keyed = parse_policy_yaml('constraints:\n  - ["296.00", "296.01"]\n  - ["401.9"]\n')
    expected = {frozenset({"296.00", "296.01"}), frozenset({"401.9"})}
    assert _as_sets(listed) == _as_sets(named) == _as_sets(keyed) == expected


@pytest.mark.parametrize("text, message", [
    ("- [296.00, 296.01]\n", "quote ICD-9 codes"),
    ('- ["296.00"]\n- ["296.00", "401.9"]\n', "overlap on code '296.00'"),
    ('- []\n', "non-empty list"),
    ('- ["401.9", "401.9"]\n', "repeats a code"),
    ("just text", "expected a list"),
    ("- [unclosed\n", "not valid YAML"),
])
def test_bad_yaml_policies(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_policy_yaml(text, "policy.yaml")


@pytest.mark.parametrize("spec, kind, arg", [
    ("hierarchy:3digit", "hierarchy", "3digit"), ("hierarchy:chapter", "hierarchy", "chapter"),
    ("similar:10", "similar", "10"), ("frequent:0.625", "frequent", "0.625"),
    ("policies/u.yaml", "file", "policies/u.yaml"), ("U.YML", "file", "U.YML"),
])
def test_policy_specs(spec, kind, arg):
    parsed = parse_policy_spec(spec)
    assert (parsed.kind, parsed.argument) == (kind, arg)
    assert str(parsed) == spec


@pytest.mark.parametrize("spec", ["hierarchy:leaf", "similar:0", "similar:x", "frequent:0",
                                  "frequent:120", "frequent:abc", "sim5", "", "policy.txt"])
def test_unknown_policy_specs_are_refused(spec):
    with pytest.raises(ParameterError, match="'policy' must be hierarchy:3digit"):
        parse_policy_spec(spec)


def test_build_policy_dispatches_and_needs_file_text():
    records = [set(CODES[:3]), set(CODES[2:])] * 3
    assert build_policy("hierarchy:3digit", records).name == "hierarchy:3digit"
    assert build_policy("similar:2", records).name == "similar:2"
    assert build_policy("frequent:50", records).name == "frequent:50"
    assert len(build_policy("u.yaml", records, yaml_text='- ["401.9"]\n')) == 1
    with pytest.raises(ConfigError, match="was not read"):
        build_policy("u.yaml", records)


def test_constraint_index_and_restriction():
    policy = UtilityPolicy("p", (frozenset({"a", "b"}), frozenset({"c"})))
    assert policy.constraint_of() == {"a": 0, "b": 0, "c": 1}
    assert policy.restricted_to({"a", "z"}).constraints == (frozenset({"a"}),)
