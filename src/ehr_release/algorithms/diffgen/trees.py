"""Integer views of a taxonomy, so specializations run as numpy array lookups.

The search moves every record one level down a tree at a time; with nodes numbered and an
ancestor table ``anc[node, d]`` (the ancestor of ``node`` at depth ``d``, or the node itself
when it is shallower) the child of ``v`` on the way to leaf ``x`` is ``anc[x, depth[v] + 1]``
for a whole column of records at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ehr_release.model.hierarchy import Hierarchy


@dataclass(frozen=True, eq=False)
class TreeIndex:
    """Nodes of a tree numbered in sorted depth-first order (the root is 0)."""

    tree: Hierarchy
    names: list[str]
    ids: dict[str, int]
    depth: np.ndarray  # int32 per node
    anc: np.ndarray  # int32 [node, depth]
    children: list[list[int]]  # child ids per node, sorted by name
    child_pos: np.ndarray  # position of a node among its parent's children (root: -1)

    @classmethod
    def build(cls, tree: Hierarchy) -> TreeIndex:
        names: list[str] = []
        stack = [tree.root]
        kids = tree.children
        while stack:
            node = stack.pop()
            names.append(node)
            stack.extend(reversed(kids.get(node, [])))
        ids = {n: i for i, n in enumerate(names)}
        depth = np.array([tree.level[n] for n in names], dtype=np.int32)
        max_depth = int(depth.max()) if len(depth) else 0
        anc = np.zeros((len(names), max_depth + 1), dtype=np.int32)
        parent = np.array([ids[tree.parent[n]] if n in tree.parent else -1 for n in names],
                          dtype=np.int32)
        for i in range(len(names)):
            node = i
            for d in range(int(depth[i]), max_depth + 1):
                anc[i, d] = i
            while node >= 0:
                anc[i, depth[node]] = node
                node = parent[node]
        children = [[ids[c] for c in kids.get(n, [])] for n in names]
        child_pos = np.full(len(names), -1, dtype=np.int32)
        for ch in children:
            for j, c in enumerate(ch):
                child_pos[c] = j
        return cls(tree, names, ids, depth, anc, children, child_pos)

    def is_leaf(self, node: int) -> bool:
        return not self.children[node]

