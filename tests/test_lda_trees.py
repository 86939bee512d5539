"""LDA's code tree: its LCA table, built a level at a time, agrees with the ancestor-row
comparison it replaced, on random trees and on ICD-9-CM; the tree is built once per
hierarchy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.lda.trees import CodeTree
from ehr_release.model.hierarchy import ROOT, Hierarchy, icd9_hierarchy


@st.composite
def trees(draw) -> Hierarchy:
    """A random rooted tree of up to 40 nodes and depth up to 6."""
    parent: dict[str, str] = {}
    level: dict[str, int] = {ROOT: 0}
    for i in range(draw(st.integers(1, 40))):
        candidates = [n for n in level if level[n] < 6]
        up = draw(st.sampled_from(sorted(candidates)))
        node = f"n{i}"
        parent[node], level[node] = up, level[up] + 1
    return Hierarchy(parent=parent, level=level)


def _pairwise(tree: CodeTree, nodes: np.ndarray) -> np.ndarray:
    return tree._lca_by_ancestors(nodes[:, None], nodes[None, :])


@settings(max_examples=60, deadline=None)
@given(trees(), st.data())
def test_the_table_is_every_pairs_lca(h: Hierarchy, data) -> None:
    tree = CodeTree.from_hierarchy(h)
    every = np.arange(len(tree.names))
    picked = data.draw(st.lists(st.sampled_from(list(every)), min_size=1, unique=True))
    nodes = np.unique(tree.anc[np.array(picked)])
    nodes = nodes[nodes >= 0]
    assert np.array_equal(tree._lca_table(nodes), _pairwise(tree, nodes))


def test_icd9_table_agrees_and_the_tree_is_built_once() -> None:
    h = icd9_hierarchy()
    tree = CodeTree.from_hierarchy(h)
    assert CodeTree.from_hierarchy(h) is tree
    rng = np.random.default_rng(5)
    codes = rng.choice(len(tree.names), 300, replace=False)
    with_table = tree.with_lca_table(codes)
    local, table = with_table._table
    closure = np.flatnonzero(local >= 0)
    assert np.array_equal(table, _pairwise(tree, closure))
    a, b = rng.choice(codes, 500), rng.choice(codes, 500)
    assert np.array_equal(with_table.lca(a, b), tree._lca_by_ancestors(a, b))
