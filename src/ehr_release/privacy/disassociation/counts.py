"""Itemset supports: inside each published chunk, and in the original records."""

from __future__ import annotations

from collections import Counter

import numpy as np

from ehr_release.model.mapping import MapFn
from ehr_release.privacy.disassociation.arrays import counted, pair_counts, row_pair_keys
from ehr_release.privacy.disassociation.tables import Tables
from ehr_release.privacy.itemset_counts import Itemset, count_itemsets


def chunk_counts_small(t: Tables) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Counts of every 1- and 2-itemset inside each chunk (keys are chunk·C + code, and
    chunk·C² + x·C + y with x < y)."""
    c = len(t.codes)
    k1, n1 = t.chunk_code_key, t.chunk_code_support  # counted once, by build_tables
    blocks = row_pair_keys(t.sub_indptr, t.sub_codes, c, t.sub_chunk * (c * c))
    k2, n2 = counted(np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64))
    return k1, n1, k2, n2


def chunk_counts_general(t: Tables, m: int, map_fn: MapFn | None = None
                         ) -> list[Counter[Itemset]]:
    """Per chunk, the count of every itemset of 1..m codes occurring in it."""
    by_chunk = count_itemsets(t.sub_indptr, t.sub_codes, t.sub_chunk, m, map_fn)
    return [by_chunk.get(g, Counter()) for g in range(len(t.chunk_label))]


def original_counts_small(t: Tables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Support in D of every code (dense) and every co-occurring pair (sorted keys x·C + y)."""
    c = len(t.codes)
    single = np.bincount(t.orig_codes, minlength=c)
    k2, n2 = pair_counts(t.orig_indptr, t.orig_codes, c)
    return single, k2, n2


def original_counts_general(t: Tables, m: int, map_fn: MapFn | None = None
                            ) -> Counter[Itemset]:
    """Support in D of every itemset of 1..m codes of some original record."""
    return count_itemsets(t.orig_indptr, t.orig_codes, None, m, map_fn).get(0, Counter())

