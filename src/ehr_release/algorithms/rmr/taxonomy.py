"""The code hierarchy as arrays: each code's ancestors, root first, for hierarchy-based cuts.

RmR generalizes a cluster's codes along the code hierarchy (ICD-9: code → 3-digit → section
→ chapter → root). A cut of the hierarchy is held per code as the depth of the node that now
stands for it; ``anc[c, d]`` is the ancestor at depth ``d`` of code ``c``, so "every code
under node g" is one comparison of a column with g.

Decision: a code that is not in the hierarchy (a local code, a typo the reader let through)
hangs directly under the root — it can still be generalized, but only all the way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ehr_release.model.hierarchy import Hierarchy


@dataclass(frozen=True)
class CodeAncestry:
    """Per code id (a :class:`~ehr_release.algorithms.artuc.codes.CodeTable`'s order): its
    chain of ancestor node ids by depth, and its own depth."""

    anc: np.ndarray
    depth: np.ndarray
    nodes: list[str]

    @classmethod
    def build(cls, names: Sequence[str], hierarchy: Hierarchy) -> CodeAncestry:
        chains: list[list[str]] = []
        for code in names:
            if code in hierarchy and code != hierarchy.root:
                chains.append([code, *hierarchy.ancestors(code)][::-1])
            else:
                chains.append([hierarchy.root, code])
        nodes = sorted({n for chain in chains for n in chain})
        index = {n: i for i, n in enumerate(nodes)}
        width = max((len(c) for c in chains), default=1)
        anc = np.full((len(names), width), -1, dtype=np.int64)
        for i, chain in enumerate(chains):
            anc[i, :len(chain)] = [index[n] for n in chain]
        depth = np.array([len(c) - 1 for c in chains], dtype=np.int64)
        return cls(anc, depth, nodes)
