"""Check a dataset against the public configuration and encode it as integer arrays.

This is where the privacy precondition "domains are public" is enforced: every categorical
value must be a leaf of its configured taxonomy, every number must lie in its configured
domain, every code must map to a leaf of the set-valued taxonomy, every class value must be
declared. A value outside the configuration is refused with an :class:`InputError` rather
than silently added -- adding it would make the output domain depend on the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from ehr_release.algorithms.diffgen.trees import TreeIndex
from ehr_release.configuration.taxonomies import DiffGenConfig, NumericalDomain
from ehr_release.core.errors import ConfigError, InputError
from ehr_release.model.dataset import CODE, PATIENT_ID, Dataset
from ehr_release.model.hierarchy import Hierarchy

#: Largest fan-out of a set-valued node: a specialization tests 2^k - 1 combinations.
MAX_SET_FANOUT = 16
#: Separator of nodes in a released cut-set label; the empty cut-set is EMPTY_SET.
SET_SEPARATOR = ";"
EMPTY_SET = "(none)"


@dataclass(frozen=True, eq=False)
class CategoricalColumn:
    name: str
    index: TreeIndex
    leaf: np.ndarray  # int32 node id of each record's value


@dataclass(frozen=True, eq=False)
class NumericalColumn:
    name: str
    domain: NumericalDomain
    values: np.ndarray  # float64


@dataclass(frozen=True, eq=False)
class SetColumn:
    """Items as parallel arrays: ``item_record[j]`` holds leaf ``item_leaf[j]``."""

    name: str
    index: TreeIndex
    item_record: np.ndarray  # int64, sorted
    item_leaf: np.ndarray  # int32
    n_items: np.ndarray  # int64 per record


@dataclass(frozen=True, eq=False)
class Encoded:
    """A dataset as DiffGen sees it: class codes plus one encoded column per predictor."""

    n: int
    class_column: str
    class_values: tuple[str, ...]
    classes: np.ndarray  # int64 index into class_values
    categorical: list[CategoricalColumn]
    numerical: list[NumericalColumn]
    set_valued: SetColumn | None

    def subset(self, rows: np.ndarray) -> Encoded:
        """The records at ``rows`` (sorted positions): train/test splits of one encoding."""
        rows = np.asarray(rows, dtype=np.int64)
        sv = self.set_valued
        if sv is not None:
            new_pos = np.full(self.n, -1, dtype=np.int64)
            new_pos[rows] = np.arange(len(rows))
            keep = new_pos[sv.item_record] >= 0
            rec = new_pos[sv.item_record[keep]]
            order = np.argsort(rec, kind="stable")
            sv = SetColumn(sv.name, sv.index, rec[order], sv.item_leaf[keep][order],
                           sv.n_items[rows])
        return Encoded(len(rows), self.class_column, self.class_values, self.classes[rows],
                       [CategoricalColumn(c.name, c.index, c.leaf[rows])
                        for c in self.categorical],
                       [NumericalColumn(c.name, c.domain, c.values[rows])
                        for c in self.numerical], sv)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0]) + 1


def _factorize(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Codes and distinct values as text (missing values become "", MIMIC's convention)."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    texts = [str(u) for u in uniques]
    if (codes < 0).any():
        codes = np.where(codes < 0, len(texts), codes)
        texts.append("")
    return codes, texts


def encode_dataset(dataset: Dataset, config: DiffGenConfig) -> Encoded:
    """Encode ``dataset`` under ``config``; raises on anything the configuration lacks.

    Raises
    ------
    InputError
        A configured column is missing, or a value is outside its public taxonomy/domain.
    ConfigError
        A set-valued node has more than :data:`MAX_SET_FANOUT` children.
    """
    pats = dataset.patients
    where = dataset.source or "dataset"
    missing = [c for c in [*config.categorical, *config.numerical, config.class_column]
               if c not in pats.columns]
    if missing:
        raise InputError(f"column(s) {missing} are configured but not in the data; choose "
                         "the released attributes with the 'predictors' parameter",
                         file=where)
    codes, texts = _factorize(pats[config.class_column])
    lookup = {v: i for i, v in enumerate(config.class_values)}
    classes = np.array([lookup.get(t, -1) for t in texts], dtype=np.int64)[codes]
    if (classes < 0).any():
        row = _first_bad(classes < 0)
        raise InputError(f"class value is not declared in the configuration "
                         f"({list(config.class_values)})", file=where, row=row,
                         column=config.class_column, detail=f"found {texts[codes[row - 1]]!r}")
    cats = [_categorical(name, tree_index(tree), pats[name], where)
            for name, tree in config.categorical.items()]
    nums = [_numerical(name, dom, pats[name], where) for name, dom in config.numerical.items()]
    sv = None
    for name, tax in config.set_valued.items():
        if tax.source in {"icd9", "icd10"} and tax.source != dataset.code_system:
            # Every code would be refused one by one: name the cause once instead.
            raise ConfigError(f"the {name!r} taxonomy is {tax.source} but the extract is "
                              f"coded in {dataset.code_system}: use taxonomy: "
                              f"{dataset.code_system}")
        sv = _set_valued(name, tax.item_of, tree_index(tax.tree), dataset, where)
    return Encoded(len(pats), config.class_column, config.class_values, classes, cats, nums,
                   sv)


@lru_cache(maxsize=64)
def tree_index(tree: Hierarchy) -> TreeIndex:
    """The :class:`TreeIndex` of a taxonomy, built once (taxonomies are immutable)."""
    return TreeIndex.build(tree)


def _categorical(name: str, index: TreeIndex, column: pd.Series,
                 where: str) -> CategoricalColumn:
    inverse, uniq = _factorize(column)
    ids = np.array([index.ids.get(u, -1) for u in uniq], dtype=np.int32)
    bad = np.array([i < 0 or not index.is_leaf(int(i)) for i in ids], dtype=bool)
    if bad.any():
        row = _first_bad(bad[inverse])
        raise InputError(f"value is not a leaf of the {name!r} taxonomy (values must be "
                         "declared in the public configuration)", file=where, row=row,
                         column=name, detail=f"found {uniq[inverse[row - 1]]!r}")
    return CategoricalColumn(name, index, ids[inverse])


def _numerical(name: str, dom: NumericalDomain, column: pd.Series,
               where: str) -> NumericalColumn:
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(values)
    if bad.any():
        row = _first_bad(bad)
        raise InputError("not a number", file=where, row=row, column=name,
                         detail=f"found {column.iloc[row - 1]!r}")
    outside = (values < dom.lo) | (values >= dom.hi)
    if dom.integer:
        outside |= values != np.floor(values)
    if outside.any():
        row = _first_bad(outside)
        kind = "integer " if dom.integer else ""
        raise InputError(f"not an {kind}value of the public domain [{dom.lo:g}, {dom.hi:g})",
                         file=where, row=row, column=name, detail=f"found {values[row - 1]:g}")
    return NumericalColumn(name, dom, values)


def _set_valued(name: str, item_of, index: TreeIndex, dataset: Dataset,
                where: str) -> SetColumn:
    widest = max((len(c) for c in index.children), default=0)
    if widest > MAX_SET_FANOUT:
        raise ConfigError(f"set-valued taxonomy {name!r} has a node with {widest} children; "
                          f"set max_fanout ≤ {MAX_SET_FANOUT} so that a specialization tests "
                          "a bounded number of child combinations")
    if any(SET_SEPARATOR in n or n == EMPTY_SET for n in index.names):
        raise ConfigError(f"set-valued taxonomy {name!r} has a node named {EMPTY_SET!r} or "
                          f"containing {SET_SEPARATOR!r}")
    diag = dataset.diagnoses
    codes = diag[CODE].astype(str).to_numpy()
    uniq, inverse = np.unique(codes, return_inverse=True)
    leaf_names = [item_of(c) for c in uniq]
    bad = np.array([n is None for n in leaf_names], dtype=bool)
    if bad.any():
        row = _first_bad(bad[inverse])
        raise InputError(f"a code has no leaf in the {name!r} taxonomy at the configured "
                         "depth", file=where, row=row, column=CODE,
                         detail=f"code {codes[row - 1]!r}")
    leaf_ids = np.array([index.ids[n] for n in leaf_names], dtype=np.int64)
    records = dataset.patients.index.get_indexer(diag[PATIENT_ID])
    pairs = np.unique(records.astype(np.int64) * len(index.names) + leaf_ids[inverse])
    rec = pairs // len(index.names)
    leaf = (pairs % len(index.names)).astype(np.int32)
    n_items = np.bincount(rec, minlength=len(dataset.patients)).astype(np.int64)
    return SetColumn(name, index, rec, leaf, n_items)
