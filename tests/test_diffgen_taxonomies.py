"""The shipped public configurations load, and the set-valued taxonomy derivation is sound."""

from __future__ import annotations

from ehr_release.configuration.taxonomies import load_config, shipped_names
from ehr_release.configuration.taxonomies.model import parse_tree, regroup, truncate
from ehr_release.model.hierarchy import icd9_hierarchy


def test_adult_and_mimic_configurations_are_shipped() -> None:
    assert {"adult", "mimic-demo"} <= set(shipped_names())
    adult = load_config("adult")
    assert len(adult.numerical) == 6 and len(adult.categorical) == 8
    assert adult.class_values == ("<=50K", ">50K") and not adult.set_valued
    mimic = load_config("mimic-demo")
    assert set(mimic.categorical) == {"gender", "marital_status", "ethnicity", "insurance",
                                      "religion", "admission_type", "admission_location"}
    assert list(mimic.set_valued) == ["codes"] and mimic.class_values == ("0", "1")


def test_every_adult_value_of_the_census_documentation_is_a_leaf() -> None:
    # the value lists of adult.names (UCI), spelled as in the data files
    documented = {
        "workclass": "Private, Self-emp-not-inc, Self-emp-inc, Federal-gov, Local-gov, "
                     "State-gov, Without-pay, Never-worked",
        "race": "White, Asian-Pac-Islander, Amer-Indian-Eskimo, Other, Black",
        "relationship": "Wife, Own-child, Husband, Not-in-family, Other-relative, Unmarried",
        "marital_status": "Married-civ-spouse, Divorced, Never-married, Separated, Widowed, "
                          "Married-spouse-absent, Married-AF-spouse",
    }
    config = load_config("adult")
    for name, values in documented.items():
        tree = config.categorical[name]
        assert set(values.split(", ")) == set(tree.leaves_under(tree.root)), name


def test_icd9_codes_are_truncated_then_regrouped_to_the_fanout() -> None:
    tax = load_config("mimic-demo").set_valued["codes"]
    tree = tax.tree
    assert max(len(c) for c in tree.children.values()) <= 4
    base = truncate(icd9_hierarchy(), 3)
    assert set(tree.leaves_under(tree.root)) == set(base.leaves_under(base.root))
    # regrouping only inserts nodes: every old ancestor of a leaf is still its ancestor
    for leaf in ["401", "250", "V45", "E849", "038"]:
        assert set(base.ancestors(leaf)) <= set(tree.ancestors(leaf))
    assert tax.item_of("401.9") == "401" and tax.item_of("250.01") == "250"
    assert tax.item_of("390-459") is None  # a chapter has no leaf at depth 3


def test_regroup_is_deterministic_and_balanced() -> None:
    tree = parse_tree({"R": [f"c{i:02d}" for i in range(10)]}, "test")
    a, b = regroup(tree, 3), regroup(tree, 3)
    assert a.parent == b.parent
    sizes = sorted(len(a.leaves_under(k)) for k in a.children["R"])
    assert sizes == [3, 3, 4]
    assert a.children["R"][0] == "c00..c03"
