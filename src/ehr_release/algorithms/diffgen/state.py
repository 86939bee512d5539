"""The search state of DiffGen: cuts, leaf partitions and where every record sits.

A *partition* is one combination of generalized values (one per predictor); the live
partitions are the leaves of the specialization tree and become the released equivalence
groups. They are stored as rows of an integer matrix (a categorical node id, an interval id
or a cut-set id per column) that only ever grows: specializing a value marks the partitions
holding it dead and appends their children. Each record carries the row of its partition
(``pid``; ``-1`` once its set-valued child combination was judged empty and dropped) and its
current generalized value per attribute, so every step is a handful of numpy lookups.

Which partitions exist never depends on the data directly: categorical and numerical
children are all created (empty or not); set-valued children exist only when their noisy
count passed the threshold, which is a differentially private decision made by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ehr_release.algorithms.diffgen.encode import EMPTY_SET, SET_SEPARATOR, Encoded
from ehr_release.algorithms.diffgen.scores import score_tables

CATEGORICAL, NUMERICAL, SET_VALUED = "categorical", "numerical", "set-valued"


@dataclass(frozen=True)
class Candidate:
    """A value of the current cut that can be specialized: column ``col``, value ``value``."""

    col: int
    kind: str
    value: int


@dataclass(frozen=True)
class SetSplit:
    """A prepared set-valued specialization, waiting for its noisy emptiness decisions.

    ``counts[i, j]`` is the number of live records of partition ``parts[i]`` whose items
    under ``node`` are covered by exactly the children in bit mask ``combos[j]``.
    """

    node: int
    parts: np.ndarray
    combos: np.ndarray
    counts: np.ndarray
    records: np.ndarray
    record_combo: np.ndarray


def interval_label(lo: float, hi: float) -> str:
    """``[18,37)``: integers without a decimal point."""
    def fmt(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else repr(float(x))
    return f"[{fmt(lo)},{fmt(hi)})"


class SearchState:
    """Cuts and partitions of one DiffGen run over an :class:`Encoded` dataset."""

    def __init__(self, enc: Encoded, score: str) -> None:
        self.enc = enc
        self.score = score
        self.ncls = len(enc.class_values)
        n = enc.n
        self.kinds = ([CATEGORICAL] * len(enc.categorical) + [NUMERICAL] * len(enc.numerical)
                      + ([SET_VALUED] if enc.set_valued is not None else []))
        self.names = ([c.name for c in enc.categorical] + [c.name for c in enc.numerical]
                      + ([enc.set_valued.name] if enc.set_valued is not None else []))
        self.n_cat = len(enc.categorical)
        self.set_col = len(self.kinds) - 1 if enc.set_valued is not None else -1
        self.cat_node = [np.zeros(n, dtype=np.int32) for _ in enc.categorical]
        self.num_iv = [np.zeros(n, dtype=np.int32) for _ in enc.numerical]
        self.intervals: list[list[tuple[float, float]]] = [
            [(c.domain.lo, c.domain.hi)] for c in enc.numerical]
        self.points: list[list[float | None]] = [[None] for _ in enc.numerical]
        sv = enc.set_valued
        self.item_node = np.zeros(0 if sv is None else len(sv.item_leaf), dtype=np.int32)
        self.cutsets: list[tuple[int, ...]] = [(0,)]
        self.cutset_ids: dict[tuple[int, ...], int] = {(0,): 0}
        self.cuts: list[list[int]] = [[0] for _ in self.kinds]
        self.rows = np.zeros((1, len(self.kinds)), dtype=np.int64)
        self.live = np.ones(1, dtype=bool)
        self.pid = np.zeros(n, dtype=np.int64)
        # Scores of a column only change when that column is specialized or records leave
        # the release (set-valued pruning); cached per column otherwise.
        self._scores: dict[int, dict[int, float]] = {}

    # ------------------------------------------------------------------ helpers
    def _num(self, col: int) -> int:
        return col - self.n_cat

    def alive(self) -> np.ndarray:
        return self.pid >= 0

    def _append_rows(self, new_rows: np.ndarray) -> np.ndarray:
        first = len(self.rows)
        self.rows = np.vstack([self.rows, new_rows])
        self.live = np.concatenate([self.live, np.ones(len(new_rows), dtype=bool)])
        return np.arange(first, first + len(new_rows))

    def _affected(self, col: int, value: int) -> np.ndarray:
        """Live partitions whose value in ``col`` is (or, for sets, contains) ``value``."""
        live = np.flatnonzero(self.live)
        if self.kinds[col] == SET_VALUED:
            holding = np.array([value in cs for cs in self.cutsets], dtype=bool)
            return live[holding[self.rows[live, col]]]
        return live[self.rows[live, col] == value]

    def _move_records(self, parts: np.ndarray, table: np.ndarray, records: np.ndarray,
                      child: np.ndarray) -> None:
        """Records of ``parts`` go to ``table[position of their partition, child]``."""
        pos = np.full(len(self.rows), -1, dtype=np.int64)
        pos[parts] = np.arange(len(parts))
        self.pid[records] = table[pos[self.pid[records]], child]
        self.live[parts] = False

    def value_label(self, col: int, value: int) -> str:
        kind = self.kinds[col]
        if kind == CATEGORICAL:
            return self.enc.categorical[col].index.names[value]
        if kind == NUMERICAL:
            return interval_label(*self.intervals[self._num(col)][value])
        return self.set_label(value)

    def set_label(self, cutset_id: int) -> str:
        names = self.enc.set_valued.index.names
        nodes = sorted(names[i] for i in self.cutsets[cutset_id])
        return SET_SEPARATOR.join(nodes) if nodes else EMPTY_SET

    def node_name(self, col: int, value: int) -> str:
        """A cut member's name: a node (categorical, set-valued) or an interval label."""
        if self.kinds[col] == SET_VALUED:
            return self.enc.set_valued.index.names[value]
        return self.value_label(col, value)

    # ------------------------------------------------------------------ candidates and scores
    def candidates(self) -> list[Candidate]:
        """Specializable cut values held by at least one live partition, in column order."""
        out: list[Candidate] = []
        live_rows = self.rows[self.live]
        for col, kind in enumerate(self.kinds):
            if kind == SET_VALUED:
                held = set().union(*(self.cutsets[i] for i in np.unique(live_rows[:, col])))
                index = self.enc.set_valued.index
                out.extend(Candidate(col, kind, v) for v in sorted(held)
                           if not index.is_leaf(v))
                continue
            held_vals = set(np.unique(live_rows[:, col]).tolist())
            for v in self.cuts[col]:
                if v not in held_vals:
                    continue
                if kind == CATEGORICAL and not self.enc.categorical[col].index.is_leaf(v):
                    out.append(Candidate(col, kind, v))
                if kind == NUMERICAL and self.points[self._num(col)][v] is not None:
                    out.append(Candidate(col, kind, v))
        return out

    def scores(self, cands: list[Candidate]) -> np.ndarray:
        """Score of every candidate on the live records (see :mod:`.scores`)."""
        alive = self.alive()
        cls = self.enc.classes
        by_col = self._scores
        for col in sorted({c.col for c in cands} - set(by_col)):
            kind = self.kinds[col]
            if kind == CATEGORICAL:
                by_col[col] = self._categorical_scores(col, alive, cls)
            elif kind == NUMERICAL:
                by_col[col] = self._numerical_scores(col, alive, cls)
            else:
                by_col[col] = self._set_scores(alive, cls)
        return np.array([by_col[c.col].get(c.value, 0.0) for c in cands], dtype=float)

    def _categorical_scores(self, col: int, alive: np.ndarray,
                            cls: np.ndarray) -> dict[int, float]:
        column = self.enc.categorical[col]
        index = column.index
        node = self.cat_node[col]
        nonleaf = np.array([not index.is_leaf(i) for i in range(len(index.names))])
        sel = alive & nonleaf[node]
        child = index.anc[column.leaf[sel], index.depth[node[sel]] + 1]
        n_nodes = len(index.names)
        counts = np.bincount(child * self.ncls + cls[sel],
                             minlength=n_nodes * self.ncls).reshape(n_nodes, self.ncls)
        out: dict[int, float] = {}
        for v in self.cuts[col]:
            if not index.is_leaf(v):
                out[v] = float(score_tables(self.score, counts[index.children[v]]))
        return out

    def _numerical_scores(self, col: int, alive: np.ndarray,
                          cls: np.ndarray) -> dict[int, float]:
        k = self._num(col)
        points = np.array([np.nan if p is None else p for p in self.points[k]])
        iv = self.num_iv[k]
        sel = alive & ~np.isnan(points[iv])
        side = (self.enc.numerical[k].values[sel] >= points[iv[sel]]).astype(np.int64)
        n_iv = len(points)
        counts = np.bincount((iv[sel] * 2 + side) * self.ncls + cls[sel],
                             minlength=n_iv * 2 * self.ncls).reshape(n_iv, 2, self.ncls)
        return {v: float(score_tables(self.score, counts[v])) for v in self.cuts[col]
                if self.points[k][v] is not None}

    def _set_masks(self, alive: np.ndarray,
                   only: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(record, node, mask)``: for each live record and non-leaf cut node it holds,
        the bit mask of the node's children that cover at least one of its items.

        Records without any item hold the root until it is specialized (mask 0 there).
        """
        sv = self.enc.set_valued
        index = sv.index
        nonleaf = np.array([not index.is_leaf(i) for i in range(len(index.names))])
        node = self.item_node
        sel = alive[sv.item_record] & nonleaf[node]
        if only is not None:
            sel &= node == only
        rec = sv.item_record[sel]
        v = node[sel].astype(np.int64)
        child = index.anc[sv.item_leaf[sel], index.depth[v] + 1]
        bits = np.left_shift(np.int64(1), index.child_pos[child].astype(np.int64))
        key = rec * len(index.names) + v
        order = np.argsort(key, kind="stable")
        key, bits = key[order], bits[order]
        if len(key):
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
            mask = np.bitwise_or.reduceat(bits, starts)
            key = key[starts]
        else:
            mask = np.zeros(0, dtype=np.int64)
        rec_out, node_out = key // len(index.names), key % len(index.names)
        if 0 in self.cuts[self.set_col] and only in (None, 0):
            empty = np.flatnonzero(alive & (sv.n_items == 0))
            rec_out = np.concatenate([rec_out, empty])
            node_out = np.concatenate([node_out, np.zeros(len(empty), dtype=np.int64)])
            mask = np.concatenate([mask, np.zeros(len(empty), dtype=np.int64)])
        return rec_out, node_out, mask

    def _set_scores(self, alive: np.ndarray, cls: np.ndarray) -> dict[int, float]:
        rec, node, mask = self._set_masks(alive)
        out: dict[int, float] = {}
        if not len(rec):
            return out
        key = np.stack([node, mask, cls[rec]], axis=1)
        uniq, counts = np.unique(key, axis=0, return_counts=True)
        for v in np.unique(uniq[:, 0]):
            rows = uniq[:, 0] == v
            masks, inverse = np.unique(uniq[rows, 1], return_inverse=True)
            table = np.zeros((len(masks), self.ncls), dtype=np.int64)
            np.add.at(table, (inverse, uniq[rows, 2]), counts[rows])
            out[int(v)] = float(score_tables(self.score, table))
        return out

    # ------------------------------------------------------------------ specializations
    def specialize_categorical(self, col: int, v: int) -> list[int]:
        """Replace node ``v`` by all its children in the cut and in every partition."""
        column = self.enc.categorical[col]
        index = column.index
        children = index.children[v]
        parts = self._affected(col, v)
        new_rows = np.repeat(self.rows[parts], len(children), axis=0)
        new_rows[:, col] = np.tile(children, len(parts))
        table = self._append_rows(new_rows).reshape(len(parts), len(children))
        recs = np.flatnonzero(self.alive() & (self.cat_node[col] == v))
        child = index.anc[column.leaf[recs], index.depth[v] + 1]
        self._move_records(parts, table, recs, index.child_pos[child])
        moved = self.cat_node[col] == v
        self.cat_node[col][moved] = index.anc[column.leaf[moved], index.depth[v] + 1]
        self.cuts[col] = sorted(set(self.cuts[col]) - {v} | set(children))
        self._scores.pop(col, None)
        return children

    def specialize_numerical(self, col: int, iv: int) -> tuple[int, int]:
        """Split interval ``iv`` at its chosen point into two new intervals."""
        k = self._num(col)
        point = self.points[k][iv]
        if point is None:
            raise ValueError(f"interval {iv} of {self.names[col]} has no split point")
        lo, hi = self.intervals[k][iv]
        self.intervals[k] += [(lo, point), (point, hi)]
        self.points[k] += [None, None]
        left, right = len(self.intervals[k]) - 2, len(self.intervals[k]) - 1
        parts = self._affected(col, iv)
        new_rows = np.repeat(self.rows[parts], 2, axis=0)
        new_rows[:, col] = np.tile([left, right], len(parts))
        table = self._append_rows(new_rows).reshape(len(parts), 2)
        in_iv = self.num_iv[k] == iv
        side = (self.enc.numerical[k].values >= point).astype(np.int64)
        recs = np.flatnonzero(self.alive() & in_iv)
        self._move_records(parts, table, recs, side[recs])
        self.num_iv[k][in_iv] = np.where(side[in_iv] == 1, right, left)
        self.cuts[col] = sorted(set(self.cuts[col]) - {iv} | {left, right})
        self._scores.pop(col, None)
        return left, right

    def set_point(self, col: int, iv: int, point: float) -> None:
        """Record the split point drawn for interval ``iv`` of numerical column ``col``."""
        self.points[self._num(col)][iv] = point
        self._scores.pop(col, None)

    def interval_records(self, col: int, iv: int) -> tuple[np.ndarray, np.ndarray]:
        """Values and classes of the live records inside interval ``iv``."""
        k = self._num(col)
        sel = self.alive() & (self.num_iv[k] == iv)
        return self.enc.numerical[k].values[sel], self.enc.classes[sel]

    def prepare_set(self, v: int) -> SetSplit:
        """Count, per partition holding ``v``, the records of every child combination."""
        index = self.enc.set_valued.index
        k = len(index.children[v])
        combos = np.arange(0 if v == 0 else 1, 1 << k, dtype=np.int64)
        parts = self._affected(self.set_col, v)
        rec, _, mask = self._set_masks(self.alive(), only=v)
        pos = np.full(len(self.rows), -1, dtype=np.int64)
        pos[parts] = np.arange(len(parts))
        combo_idx = mask - combos[0]
        counts = np.bincount(pos[self.pid[rec]] * len(combos) + combo_idx,
                             minlength=len(parts) * len(combos)).reshape(len(parts),
                                                                         len(combos))
        return SetSplit(v, parts, combos, counts, rec, combo_idx)

    def apply_set(self, split: SetSplit, keep: np.ndarray) -> None:
        """Create the kept child partitions; records of dropped ones leave the release."""
        index = self.enc.set_valued.index
        children = index.children[split.node]
        col = self.set_col
        table = np.full(keep.shape, -1, dtype=np.int64)
        new_rows = []
        for i, j in zip(*np.nonzero(keep), strict=True):
            base = set(self.cutsets[int(self.rows[split.parts[i], col])]) - {split.node}
            chosen = {children[b] for b in range(len(children)) if split.combos[j] >> b & 1}
            cutset = tuple(sorted(base | chosen))
            if cutset not in self.cutset_ids:
                self.cutset_ids[cutset] = len(self.cutsets)
                self.cutsets.append(cutset)
            row = self.rows[split.parts[i]].copy()
            row[col] = self.cutset_ids[cutset]
            new_rows.append(row)
        if new_rows:
            ids = self._append_rows(np.array(new_rows, dtype=np.int64))
            table[np.nonzero(keep)] = ids
        self._move_records(split.parts, table, split.records, split.record_combo)
        sv = self.enc.set_valued
        moved = self.item_node == split.node
        self.item_node[moved] = index.anc[sv.item_leaf[moved],
                                          index.depth[split.node] + 1]
        self.cuts[col] = sorted(set(self.cuts[col]) - {split.node} | set(children))
        self._scores.clear()  # records of dropped combinations left every column's scores

    # ------------------------------------------------------------------ output
    def group_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Live partition rows and their true ``[partition, class]`` counts."""
        alive = self.alive()
        live = np.flatnonzero(self.live)
        counts = np.bincount(self.pid[alive] * self.ncls + self.enc.classes[alive],
                             minlength=len(self.rows) * self.ncls)
        return live, counts.reshape(len(self.rows), self.ncls)[live]

    def partition_order(self, parts: np.ndarray) -> np.ndarray:
        """Positions sorting ``parts`` by taxonomy order, interval start, cut-set label."""
        keys: list[np.ndarray] = []
        for col, kind in enumerate(self.kinds):
            values = self.rows[parts, col]
            if kind == NUMERICAL:
                starts = np.array([lo for lo, _ in self.intervals[self._num(col)]])
                keys.append(starts[values])
            elif kind == SET_VALUED:
                labels = np.array([self.set_label(int(v)) for v in values], dtype=object)
                keys.append(np.unique(labels, return_inverse=True)[1])
            else:
                keys.append(values)
        return np.lexsort(keys[::-1]) if keys else np.arange(len(parts))

    def partition_labels(self, parts: np.ndarray) -> dict[str, list[str]]:
        """Column name → generalized value label of each partition in ``parts``."""
        out: dict[str, list[str]] = {}
        for col, name in enumerate(self.names):
            values = self.rows[parts, col]
            labels = {int(v): self.value_label(col, int(v)) for v in np.unique(values)}
            out[name] = [labels[int(v)] for v in values]
        return out

    def cut_description(self) -> list[dict[str, Any]]:
        """The final cut of every predictor, for ``cut.json``."""
        out: list[dict[str, Any]] = []
        for col, (kind, name) in enumerate(zip(self.kinds, self.names, strict=True)):
            entry: dict[str, Any] = {"name": name, "kind": kind}
            if kind == NUMERICAL:
                k = self._num(col)
                dom = self.enc.numerical[k].domain
                ivs = sorted(self.intervals[k][v] for v in self.cuts[col])
                entry.update(domain=dom.as_dict(),
                             cut=[interval_label(lo, hi) for lo, hi in ivs],
                             intervals=[[lo, hi] for lo, hi in ivs])
            else:
                entry["cut"] = sorted(self.node_name(col, v) for v in self.cuts[col])
            out.append(entry)
        return out
