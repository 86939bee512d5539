"""Generalize records with a released cut: what a data user does with test records.

The paper evaluates a release by training on the groups and testing on records generalized
"with the same cut"; the count-query error compares released counts with the true counts of
the same generalized groups. Both need the original-record → released-label mapping, which
only depends on the public ``cut.json``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ehr_release.algorithms.diffgen.encode import EMPTY_SET, SET_SEPARATOR, Encoded
from ehr_release.algorithms.diffgen.state import interval_label
from ehr_release.algorithms.diffgen.trees import TreeIndex


def _cut_member(index: TreeIndex, cut: list[str], leaves: np.ndarray) -> np.ndarray:
    """For each leaf id, the id of its ancestor-or-self that belongs to ``cut``."""
    in_cut = np.zeros(len(index.names), dtype=bool)
    in_cut[[index.ids[name] for name in cut]] = True
    hit = in_cut[index.anc[leaves]]  # [leaf, depth]
    if not hit.any(axis=1).all():
        raise ValueError("the cut does not cover every leaf of its taxonomy")
    return index.anc[leaves, hit.argmax(axis=1)]


def generalize(enc: Encoded, cut_doc: dict[str, Any]) -> pd.DataFrame:
    """One row per record: the released label of every predictor plus the class value."""
    cuts = {a["name"]: a for a in cut_doc["attributes"]}
    out: dict[str, np.ndarray] = {}
    for col in enc.categorical:
        ids = _cut_member(col.index, cuts[col.name]["cut"], col.leaf)
        out[col.name] = np.array(col.index.names, dtype=object)[ids]
    for col in enc.numerical:
        intervals = sorted(tuple(iv) for iv in cuts[col.name]["intervals"])
        starts = np.array([lo for lo, _ in intervals])
        pos = np.searchsorted(starts, col.values, side="right") - 1
        labels = np.array([interval_label(lo, hi) for lo, hi in intervals], dtype=object)
        out[col.name] = labels[pos]
    sv = enc.set_valued
    if sv is not None:
        entry = cuts[sv.name]
        ids = _cut_member(sv.index, entry["cut"], sv.item_leaf)
        names = np.array(sv.index.names, dtype=object)
        frame = pd.DataFrame({"r": sv.item_record, "n": names[ids]}).drop_duplicates()
        joined = frame.sort_values(["r", "n"]).groupby("r")["n"].agg(SET_SEPARATOR.join)
        labels = np.full(enc.n, EMPTY_SET, dtype=object)
        labels[joined.index.to_numpy()] = joined.to_numpy()
        if entry["taxonomy_root"] in entry["cut"]:
            labels[:] = entry["taxonomy_root"]  # the root stands for any set, even empty
        out[sv.name] = labels
    frame = pd.DataFrame(out)
    frame[enc.class_column] = np.array(enc.class_values, dtype=object)[enc.classes]
    return frame
