"""Row-level checks shared by the readers: codes, ages, patient ids.

Each check reports the first offending row (1-based, header excluded) and column, because a
data steward fixes files one error at a time and needs to find the line.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ehr_release.errors import InputError
from ehr_release.hierarchy import icd9_hierarchy, normalize_icd9

MAX_AGE = 130


def check_unique_ids(ids: pd.Series, path: Path, column: str = "patient_id") -> None:
    blank = ids.eq("")
    if blank.any():
        raise InputError("patient id is empty", file=str(path),
                         row=int(blank.to_numpy().argmax()) + 1, column=column)
    dup = ids.duplicated()
    if dup.any():
        row = int(dup.to_numpy().argmax()) + 1
        first = int(ids.eq(ids.iloc[row - 1]).to_numpy().argmax()) + 1
        # Name rows, never the identifier itself: messages end up in logs and the audit trail.
        raise InputError(f"duplicate patient id (same as row {first})", file=str(path),
                         row=row, column=column)


def normalize_codes(raw: pd.Series, rows: pd.Series, path: Path, column: str) -> pd.Series:
    """Dotted ICD-9 codes for ``raw``; raises on the first code not in the hierarchy.

    ``rows`` gives the source row number of each entry (long tables map 1:1, wide tables
    repeat a row once per code).
    """
    hierarchy = icd9_hierarchy()
    uniques = pd.unique(raw)
    mapping = {u: normalize_icd9(u) for u in uniques}
    bad = [u for u, v in mapping.items() if v not in hierarchy or v == hierarchy.root]
    if bad:
        first = raw.isin(bad).to_numpy().argmax()
        code = raw.iloc[first]
        problem = ("malformed ICD-9 code: not a node of the ICD-9-CM hierarchy"
                   if code else "empty ICD-9 code")
        raise InputError(problem, file=str(path), row=int(rows.iloc[first]), column=column,
                         detail=f"found {code!r}" if code else None)
    return raw.map(mapping)


def parse_ages(raw: pd.Series, rows: pd.Series, path: Path, column: str) -> pd.Series:
    """Integer ages (nullable where blank); raises on the first non-numeric or impossible age."""
    blank = raw.eq("")
    num = pd.to_numeric(raw.where(~blank), errors="coerce")
    bad = num.isna() & ~blank
    if bad.any():
        i = int(bad.to_numpy().argmax())
        raise InputError("age is not a number", file=str(path), row=int(rows.iloc[i]),
                         column=column, detail=f"found {raw.iloc[i]!r}")
    out_of_range = (num < 0) | (num > MAX_AGE) | (num.notna() & (num % 1 != 0))
    if out_of_range.any():
        i = int(out_of_range.to_numpy().argmax())
        raise InputError(f"age must be a whole number from 0 to {MAX_AGE}", file=str(path),
                         row=int(rows.iloc[i]), column=column, detail=f"found {raw.iloc[i]!r}")
    return num.astype("Int64")
