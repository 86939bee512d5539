import pytest

from ehr_release.model.hierarchy import icd9_hierarchy, normalize_icd9


@pytest.mark.parametrize("raw, dotted", [("29601", "296.01"), ("V4581", "V45.81"),
                                         ("E8497", "E849.7"), ("250", "250"),
                                         (" 4019 ", "401.9"), ("296.01", "296.01"),
                                         ("290-319", "290-319")])
def test_normalize(raw, dotted):
    assert normalize_icd9(raw) == dotted


def test_shipped_hierarchy_shape():
    h = icd9_hierarchy()
    assert len(h.parent) == 17726
    assert sum(1 for n in h.level if h.level[n] == 1) == 19
    assert list(h.ancestors("296.01")) == ["296.0", "296", "295-299", "290-319", "ROOT"]
    assert h.common_ancestor(["296.01", "295.04"]) == "295-299"
    assert h.ancestor_at_level("296.01", 3) == "296"
    leaves = h.leaves_under("296.0")
    assert "296.01" in leaves and all(h.is_leaf(x) for x in leaves)
    assert sum(1 for n in h.level if n != "ROOT" and h.is_leaf(n)) == 14567
