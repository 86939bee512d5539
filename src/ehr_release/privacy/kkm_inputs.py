"""The verifier's and the attack's own reading of the original under a (k, k^m) configuration.

Why not reuse the anonymizer's reading (``constraints.rt_data``): the verifier exists to
catch the algorithm's mistakes, so it must not share them — a reading that, say, let an
out-of-domain age through would then be accepted on both sides. The *configuration* is
shared on purpose: :func:`ehr_release.configuration.constraints.load_config` /
``parse_config`` only turn the data owner's file into typed values (attributes,
hierarchies, domains, constraints) and take no decision about the data, and both sides
must judge against the same configuration.
What a record's configured demographics and codes are is decided here, from the
configuration's definitions alone:

* a numerical attribute holds a number inside its configured domain ``[low, high]``;
* a categorical attribute holds a node of its configured hierarchy (text; missing is ``""``,
  which is a node of no hierarchy and so refused);
* the codes are each patient's distinct diagnosis codes.

A value that breaks a rule is refused with the same error, row and column the steward sees
from the anonymizer, so the two readings also agree on what they refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from ehr_release.configuration.constraints import Attribute, NumericalAttribute, RTConfig
from ehr_release.core.errors import ConfigError, InputError
from ehr_release.model.dataset import Dataset


class OriginalView(Protocol):
    """What the (k, k^m) checks read of the original: ids, demographics, code sets, in
    patient order. :class:`OriginalRecords` is one; so is the anonymizer's ``RTData``,
    which the utility evaluation passes to :func:`ehr_release.privacy.kkm.suppressed_occurrences`.
    """

    @property
    def patient_ids(self) -> list[str]: ...

    @property
    def demographics(self) -> pd.DataFrame: ...

    @property
    def codes(self) -> list[frozenset[str]]: ...


@dataclass(frozen=True)
class OriginalRecords:
    """The original as the (k, k^m) checks see it.

    ``demographics`` has one column per configured attribute (numbers as ``float64``, nodes
    as ``str``), rows in patient order; ``codes[i]`` is patient i's set of codes.
    """

    patient_ids: list[str]
    demographics: pd.DataFrame
    codes: list[frozenset[str]]


def read_original(dataset: Dataset, config: RTConfig) -> OriginalRecords:
    """The configured demographics and the code sets of ``dataset``, each value checked.

    Raises
    ------
    ConfigError
        A configured attribute is not a column of the dataset.
    InputError
        A value is missing, outside its numerical domain, or not a node of its hierarchy
        (the first such row of the first such attribute, in configuration order).
    """
    patients = dataset.patients
    absent = [name for name in config.names if name not in patients.columns]
    if absent:
        raise ConfigError(f"configured attribute {absent[0]!r} is not a column of the data "
                          f"(columns: {', '.join(map(str, dataset.demographic_columns))})")
    where = dataset.source or "dataset"  # every input error names its file
    columns = {attr.name: _read_column(patients[attr.name], attr, where)
               for attr in config.attributes}
    frame = pd.DataFrame(columns, index=patients.index, columns=config.names)
    return OriginalRecords(list(dataset.patient_ids), frame, list(dataset.code_sets()))


def _read_column(column: pd.Series, attr: Attribute, where: str) -> pd.Series:
    if isinstance(attr, NumericalAttribute):
        numbers = pd.to_numeric(column, errors="coerce").to_numpy(dtype="float64",
                                                                   na_value=np.nan)
        # NaN fails both comparisons, so a missing or unreadable value counts as outside
        inside = (numbers >= attr.domain.low) & (numbers <= attr.domain.high)
        _refuse_first(~inside, column, attr.name,
                      f"value is missing or outside the configured domain {attr.domain}", where)
        return pd.Series(numbers, index=column.index, dtype="float64")
    text = column.astype("string").fillna("")
    nodes = attr.hierarchy.level
    known = np.fromiter((value in nodes for value in text), dtype=bool, count=len(text))
    _refuse_first(~known, text, attr.name, "value is not a node of the configured hierarchy",
                  where)
    return pd.Series(text.to_numpy(dtype=object), index=column.index, dtype=object)


def _refuse_first(bad: np.ndarray, shown: pd.Series, name: str, problem: str,
                  where: str) -> None:
    """Raise for the first row flagged in ``bad`` (1-based, as a spreadsheet counts)."""
    rows = np.flatnonzero(bad)
    if len(rows):
        row = int(rows[0])
        raise InputError(problem, file=where, row=row + 1, column=name,
                         detail=f"found {str(shown.iloc[row])!r}")
