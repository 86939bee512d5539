"""The two generalization hierarchies of LDA, encoded as integers for vectorized LCAs.

* ICD codes: any :class:`~ehr_release.model.hierarchy.Hierarchy` (the packaged ICD-9-CM, or a toy
  tree in tests). Node ids index an ancestor table ``anc[node, level]``; the lowest common
  ancestor of two nodes is the deepest level where their ancestor rows agree.
* Ages: a full binary tree over ``first … first + 2**depth − 1`` (1–128 in the thesis).
  A node is a block of ``2**level`` ages aligned to its size, encoded as
  ``level << depth | offset`` with ``offset`` the 0-based first age of the block. The LCA
  level of two blocks is the larger of their levels and the bit length of
  ``offset_a XOR offset_b`` — no tree walk at all.

Both trees also answer L(node), the leaf count used by the loss metric (see
:mod:`ehr_release.algorithms.lda.loss`), under either leaf convention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from ehr_release.core.errors import InputError
from ehr_release.model.hierarchy import Hierarchy

#: Largest closure (codes + ancestors) given an LCA table: 4096² int64 = 128 MiB.
MAX_TABLE_NODES = 4096


@dataclass(frozen=True, eq=False)
class CodeTree:
    """Integer view of a code hierarchy: ids, levels, ancestor table, leaf counts."""

    hierarchy: Hierarchy
    names: list[str]
    ids: dict[str, int]
    level: np.ndarray
    anc: np.ndarray
    leaves: np.ndarray
    is_leaf: np.ndarray
    root: int
    size: int  # |A|: number of leaves of the whole tree
    _table: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _lc_cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_hierarchy(cls, h: Hierarchy) -> CodeTree:
        """The integer view of ``h``, built once per hierarchy and process (a hierarchy is
        immutable; ICD-9-CM's 17,000 nodes take 0.02 s, which every LDA run and
        comparison row paid again)."""
        return _code_tree(h)

    @classmethod
    def _build(cls, h: Hierarchy) -> CodeTree:
        names = [h.root, *sorted(h.parent, key=lambda n: (h.level[n], n))]
        ids = {n: i for i, n in enumerate(names)}
        level = np.array([h.level[n] for n in names], dtype=np.int64)
        depth = int(level.max()) + 1
        anc = np.full((len(names), depth), -1, dtype=np.int64)
        anc[0, 0] = 0
        parent = np.array([ids[h.parent[n]] if n in h.parent else 0 for n in names])
        for i in range(1, len(names)):  # names are sorted by level: parents come first
            anc[i] = anc[parent[i]]
            anc[i, level[i]] = i
        is_leaf = np.ones(len(names), dtype=bool)
        is_leaf[parent[1:]] = False
        n_leaves = is_leaf.astype(np.int64)
        for i in range(len(names) - 1, 0, -1):  # children before parents
            n_leaves[parent[i]] += n_leaves[i]
        return cls(h, names, ids, level, anc, n_leaves, is_leaf, 0, int(n_leaves[0]))

    def encode(self, codes: list[str], *, source: str = "diagnoses") -> np.ndarray:
        """Node ids of ``codes``; :class:`InputError` for a code outside the hierarchy."""
        try:
            return np.array([self.ids[c] for c in codes], dtype=np.int64)
        except KeyError as exc:
            raise InputError("a code is not a node of the ICD hierarchy", file=source,
                             detail=f"code {exc.args[0]!r}") from None

    def with_lca_table(self, codes: np.ndarray) -> CodeTree:
        """The same tree with a precomputed LCA table over ``codes`` and their ancestors.

        Alignment asks for LCAs of the same few hundred nodes millions of times; a table
        lookup replaces the ancestor-row comparison. Skipped for very large vocabularies
        (the table grows with the square of the closure).
        """
        closure = np.unique(self.anc[np.asarray(codes, dtype=np.int64)])
        closure = closure[closure >= 0]
        if len(closure) > MAX_TABLE_NODES:
            return self
        local = np.full(len(self.names), -1, dtype=np.int64)
        local[closure] = np.arange(len(closure))
        table = self._lca_table(closure)
        return CodeTree(self.hierarchy, self.names, self.ids, self.level, self.anc,
                        self.leaves, self.is_leaf, self.root, self.size,
                        _table=(local, table))

    def lca(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Element-wise lowest common ancestor of node ids ``a`` and ``b`` (broadcasting)."""
        if self._table is not None:
            local, table = self._table
            la, lb = local[a], local[b]
            if la.min(initial=0) >= 0 and lb.min(initial=0) >= 0:
                return table[la, lb]
        return self._lca_by_ancestors(a, b)

    def _lca_table(self, nodes: np.ndarray) -> np.ndarray:
        """``table[i, j]`` = the LCA of ``nodes[i]`` and ``nodes[j]``, one level at a time:
        two nodes' ancestors agree down to their LCA's level and nowhere below, so the
        deepest level where they agree gives it. One n × n comparison per level, where
        comparing whole ancestor rows made an n × n × depth array (ICD-9 closures of 848
        and 4,567 nodes: 0.10 and 6.2 s that way, 0.007 and 0.18 s this way)."""
        rows = self.anc[nodes]
        table = np.full((len(nodes), len(nodes)), self.root, dtype=np.int64)
        for level in range(1, rows.shape[1]):
            ancestor = rows[:, level]
            agree = (ancestor[:, None] == ancestor[None, :]) & (ancestor >= 0)[:, None]
            np.copyto(table, ancestor[:, None], where=agree)
        return table

    def _lca_by_ancestors(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        same = np.logical_and.accumulate(self.anc[a] == self.anc[b], axis=-1)
        deepest = np.minimum(np.minimum(same.sum(axis=-1) - 1, self.level[a]), self.level[b])
        return np.take_along_axis(self.anc[a], deepest[..., None], axis=-1)[..., 0]

    def is_ancestor_or_self(self, anc: np.ndarray, node: np.ndarray) -> np.ndarray:
        """Element-wise: is ``anc`` the node itself or one of its ancestors?"""
        return self.anc[node, self.level[anc]] == anc

    def loss_count(self, leaf_count: int) -> np.ndarray:
        """L(node) for the loss metric: leaves under the node; a leaf counts ``leaf_count``."""
        if leaf_count not in self._lc_cache:
            self._lc_cache[leaf_count] = np.where(self.is_leaf, leaf_count, self.leaves)
        return self._lc_cache[leaf_count]


@lru_cache(maxsize=8)
def _code_tree(h: Hierarchy) -> CodeTree:
    return CodeTree._build(h)


@dataclass(frozen=True)
class AgeTree:
    """Full binary tree over ``first … first + 2**depth − 1`` (thesis: 1–128, depth 7)."""

    first: int = 1
    depth: int = 7

    @property
    def size(self) -> int:
        return 1 << self.depth

    @property
    def root(self) -> int:
        return self.depth << self.depth

    @property
    def last(self) -> int:
        return self.first + self.size - 1

    def encode(self, ages: np.ndarray | list[int], *, source: str = "diagnoses") -> np.ndarray:
        """Leaf codes of ``ages``; :class:`InputError` for an age outside the tree."""
        ages = np.asarray(ages, dtype=np.int64)
        bad = (ages < self.first) | (ages > self.last)
        if bad.any():
            raise InputError(f"an age is outside the age hierarchy {self.first}–{self.last}",
                             file=source, detail=f"age {int(ages[bad][0])}")
        return ages - self.first

    def level(self, node: np.ndarray) -> np.ndarray:
        return np.asarray(node) >> self.depth

    @cached_property
    def _tables(self) -> tuple[np.ndarray, np.ndarray] | None:
        """LCA of every pair of node codes and L(node) per code, for trees up to 2**8 ages."""
        if self.depth > 8:
            return None
        codes = np.arange((self.depth + 1) << self.depth)
        return self._lca_by_bits(codes[:, None], codes[None, :]), 1 << (codes >> self.depth)

    @cached_property
    def _leaf_zero_sizes(self) -> np.ndarray | None:
        if self._tables is None:
            return None
        sizes = self._tables[1]
        return np.where(sizes == 1, 0, sizes)

    def lca(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Element-wise lowest common ancestor block of age nodes ``a`` and ``b``."""
        if self._tables is not None:
            return self._tables[0][a, b]
        return self._lca_by_bits(np.asarray(a), np.asarray(b))

    def _lca_by_bits(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        mask = self.size - 1
        off_a, off_b = a & mask, b & mask
        lvl = np.maximum(np.maximum(a >> self.depth, b >> self.depth),
                         _bit_length(off_a ^ off_b))
        return (lvl << self.depth) | ((off_a >> lvl) << lvl)

    def loss_count(self, node: np.ndarray, leaf_count: int) -> np.ndarray:
        """L(node): the block's size in years; a single age counts ``leaf_count``."""
        if self._tables is not None:
            return (self._tables[1] if leaf_count == 1 else self._leaf_zero_sizes)[node]
        lvl = np.asarray(node) >> self.depth
        return np.where(lvl == 0, leaf_count, 1 << lvl)

    def interval(self, node: int) -> tuple[int, int]:
        """First and last age of a block."""
        lvl, off = node >> self.depth, node & (self.size - 1)
        return self.first + off, self.first + off + (1 << lvl) - 1

    def from_interval(self, lo: int, hi: int) -> int | None:
        """The node of block [lo, hi], or None if that is not a block of this tree."""
        width = hi - lo + 1
        off = lo - self.first
        if width < 1 or width & (width - 1) or off < 0 or hi > self.last or off % width:
            return None
        return (width.bit_length() - 1) << self.depth | off


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Bit length of non-negative integers below 2**53 (frexp's exponent is exact)."""
    return np.frexp(np.asarray(x, dtype=np.float64))[1].astype(np.int64)
