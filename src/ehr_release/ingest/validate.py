"""Row-level checks of the full reader: codes, ages, patient ids, over pandas columns.

Each check reports the first offending row (1-based, header excluded) and column, because a
data steward fixes files one error at a time and needs to find the line. What counts as
valid is decided in :mod:`ehr_release.ingest.rules`, value by value, shared with the CLI's
preflight; here each rule runs once per distinct value of a column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.ingest.rules import (
    NOT_A_NUMBER,
    OUT_OF_RANGE,
    age_error,
    age_verdict,
    code_error,
    code_verdict,
    detect_code_system,
    id_problem,
    mixed_error,
)


def check_unique_ids(ids: pd.Series, path: Path, column: str = "patient_id") -> None:
    id_problem(ids.tolist(), path, column)


def normalize_codes(raw: pd.Series, rows: pd.Series, path: Path, column: str,
                    system: str | None = None) -> tuple[pd.Series, str]:
    """Dotted codes for ``raw`` and their code system (``system`` when declared, else
    detected: :func:`~ehr_release.ingest.rules.detect_code_system`); raises on a mix of
    ICD-9 and ICD-10, then on the first code not in the system's hierarchy.

    ``rows`` gives the source row number of each entry (long tables map 1:1, wide tables
    repeat a row once per code).
    """
    distinct = list(pd.unique(raw))
    found = detect_code_system(distinct, system)
    if isinstance(found, tuple):
        row9, row10 = (int(rows.iloc[int(raw.eq(t).to_numpy().argmax())]) for t in found)
        raise mixed_error(path, row9, row10, column)
    mapping = {u: code_verdict(u, found) for u in distinct}
    bad = [u for u, v in mapping.items() if v is None]
    if bad:
        first = int(raw.isin(bad).to_numpy().argmax())
        raise code_error(raw.iloc[first], path, int(rows.iloc[first]), column, found)
    return raw.map(mapping), found


def read_codes(raw: pd.Series, rows: pd.Series, path: Path, column: str,
               system: str | None = None, mapping: str | None = None,
               icd9: pd.Series | None = None) -> tuple[pd.Series, str, str | None]:
    """:func:`normalize_codes`, or with ``mapping`` (``gem``) the ICD-10-CM codes of an
    extract whose ICD-9-CM codes are mapped by :mod:`ehr_release.ingest.gem` (entries
    dropped by the mapping are ``None``).

    ``icd9`` marks the entries the source declares ICD-9-CM (MIMIC-IV's ``icd_version``);
    without it the codes decide (rule 1 of :mod:`ehr_release.ingest.gem`). Returns the
    codes, their system and the mapping's losses in stored form (None without a mapping).
    """
    if mapping is None:
        return (*normalize_codes(raw, rows, path, column, system), None)
    from ehr_release.ingest.gem import GEM, map_codes

    if mapping != GEM:
        raise ValueError(f"unknown code mapping {mapping!r}; expected {GEM!r}")
    if system not in (None, "icd10"):
        raise ValueError("code mapping gem maps ICD-9-CM to ICD-10-CM: declare code system "
                         "icd10, or none")
    if icd9 is None:  # rule 1 of ehr_release.ingest.gem: the extract's codes decide
        distinct = list(pd.unique(raw))
        found = detect_code_system(distinct)
        nine_only = (distinct if found == "icd9" else [] if found == "icd10" else
                     [t for t in distinct if code_verdict(t, "icd10") is None
                      and code_verdict(t, "icd9") is not None])
        icd9 = raw.isin(nine_only)
    is9 = np.asarray(icd9, dtype=bool)
    out = np.full(len(raw), None, dtype=object)
    for mask, part_system in ((~is9, "icd10"), (is9, "icd9")):
        if mask.any():
            out[mask] = normalize_codes(raw[mask], rows[mask], path, column,
                                        part_system)[0].to_numpy(dtype=object)
    nine = pd.Series(out[is9], dtype=object)
    mapped, losses = map_codes(pd.unique(nine), nine.value_counts().to_dict())
    out[is9] = nine.map(mapped).to_numpy(dtype=object)
    return pd.Series(out, index=raw.index, dtype=object), "icd10", losses.as_schema()


def parse_ages(raw: pd.Series, rows: pd.Series, path: Path, column: str) -> pd.Series:
    """Integer ages (nullable where blank); raises on the first non-numeric, then the first
    impossible age."""
    verdicts = {u: age_verdict(u) for u in pd.unique(raw)}
    for problem in (NOT_A_NUMBER, OUT_OF_RANGE):
        bad = [u for u, v in verdicts.items() if v == problem]
        if bad:
            i = int(raw.isin(bad).to_numpy().argmax())
            raise age_error(problem, raw.iloc[i], path, int(rows.iloc[i]), column)
    ages = raw.map(verdicts).to_numpy(dtype=object)
    return pd.Series(pd.array(ages, dtype="Int64"), index=raw.index)
