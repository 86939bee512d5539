"""Ages from birth and event dates, including MIMIC's unknown-century dates.

MIMIC shifts dates into 2100–2200 and the demo copy writes them ``m/d/yy`` with two-digit
years, so the century is unknown: an age is the difference of the years modulo 100 (minus one
before the birthday). Dates of birth of patients over 89 were moved 300 years earlier and are
written in full (years before 1900); those patients are top-coded at 90, the HIPAA Safe
Harbor convention for ages over 89.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.core.errors import InputError

TOP_CODED_AGE = 90
_FORMATS_2DIGIT = ("%m/%d/%y %H:%M", "%m/%d/%y %H:%M:%S", "%m/%d/%y")
_FORMATS_4DIGIT = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%m/%d/%Y %H:%M",
                   "%m/%d/%Y")


def parse_dates(raw: pd.Series, path: Path, column: str) -> tuple[pd.Series, np.ndarray]:
    """Parse date strings; returns (timestamps, two_digit_year flags).

    Raises naming the first row whose date matches none of the accepted formats.
    """
    parsed = pd.Series(pd.NaT, index=raw.index, dtype="datetime64[ns]")
    two_digit = np.zeros(len(raw), dtype=bool)
    for fmts, short in ((_FORMATS_2DIGIT, True), (_FORMATS_4DIGIT, False)):
        for fmt in fmts:
            todo = parsed.isna() & raw.ne("")
            if not todo.any():
                break
            got = pd.to_datetime(raw[todo], format=fmt, errors="coerce")
            parsed[todo] = got
            if short:
                two_digit[todo.to_numpy()] |= got.notna().to_numpy()
    bad = parsed.isna()
    if bad.any():
        i = int(bad.to_numpy().argmax())
        raise InputError("not a recognised date (m/d/yy or yyyy-mm-dd)", file=str(path),
                         row=i + 1, column=column, detail=f"found {raw.iloc[i]!r}")
    return parsed, two_digit


def ages_at(birth: pd.Series, birth_short: np.ndarray,
            event: pd.Series, event_short: np.ndarray) -> np.ndarray:
    """Whole years from ``birth`` to ``event``, elementwise, as described in the module doc."""
    by, ey = birth.dt.year.to_numpy(), event.dt.year.to_numpy()
    before_birthday = (event.dt.month.to_numpy() * 100 + event.dt.day.to_numpy()) < (
        birth.dt.month.to_numpy() * 100 + birth.dt.day.to_numpy()
    )
    unknown_century = birth_short | event_short
    years = np.where(unknown_century, (ey % 100 - by % 100) % 100, ey - by)
    ages = years - before_birthday.astype(int)
    shifted_elderly = (~birth_short) & (by < 1900)
    return np.where(shifted_elderly, TOP_CODED_AGE, ages)
