"""The UCI Adult census files as the project's wide extract (the DiffGen paper's benchmark).

Adult has demographics and a class (income) but no diagnosis codes, so it becomes a wide
table with an empty ``codes`` column: the Dataset model stays one model, and DiffGen runs
with the shipped ``adult`` configuration (6 numerical + 8 categorical predictors). Records
with a missing value (``?``) are dropped, as in the paper: 45,222 remain of 48,842.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ehr_release.core.errors import InputError
from ehr_release.model.dataset import Dataset

COLUMNS = ("age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
           "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
           "hours_per_week", "native_country", "income")
NUMERICAL = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss",
             "hours_per_week")
FILES = ("adult.data", "adult.test")
CLASS_COLUMN = "income"


def adult_frame(folder: str | Path) -> pd.DataFrame:
    """``adult.data`` + ``adult.test`` without missing values, one row per person.

    Each file may also be gzipped (``adult.data.gz``: the copy ``examples/data/adult`` ships).

    Columns: ``patient_id`` (``A00001``...), the 14 attributes, ``income`` (``<=50K`` /
    ``>50K``; the test file's trailing dots removed) and an empty ``codes`` column.
    """
    parts = []
    for name in FILES:
        path = Path(folder) / name
        if not path.is_file() and path.with_name(f"{name}.gz").is_file():
            path = path.with_name(f"{name}.gz")
        if not path.is_file():
            raise InputError("Adult file not found", file=str(path))
        frame = pd.read_csv(path, header=None, names=list(COLUMNS), dtype=str,
                            skipinitialspace=True, comment="|", keep_default_na=False)
        parts.append(frame)
    frame = pd.concat(parts, ignore_index=True)
    frame = frame[(frame != "?").all(axis=1) & frame["income"].ne("")]
    frame = frame.reset_index(drop=True)
    frame["income"] = frame["income"].str.rstrip(".")
    for col in NUMERICAL:
        frame[col] = pd.to_numeric(frame[col]).astype("int64")
    width = len(str(len(frame)))
    frame.insert(0, "patient_id", [f"A{i:0{width}d}" for i in range(1, len(frame) + 1)])
    frame["codes"] = ""
    return frame


def read_adult(folder: str | Path) -> Dataset:
    """Adult as a :class:`Dataset` (empty diagnoses table), class column ``income``."""
    frame = adult_frame(folder)
    patients = frame.drop(columns=["codes"]).set_index("patient_id")
    patients["age"] = patients["age"].astype("Int64")
    diagnoses = pd.DataFrame({"patient_id": pd.Series([], dtype=object),
                              "code": pd.Series([], dtype=object),
                              "age": pd.array([], dtype="Int64")})
    return Dataset(patients, diagnoses, class_column=CLASS_COLUMN, source=str(folder))
