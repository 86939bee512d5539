"""Hostile input: whatever bytes arrive, a reader loads them or raises our InputError.

Never a traceback from deep inside pandas/pyarrow, never a hang. Files are built from
fragments that look almost right (headers, separators, codes, ages, quotes, NULs, stray
bytes), which reach deeper into the readers than uniform noise would.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release.core.errors import InputError
from ehr_release.ingest import read_dataset

HEADERS = ["patient_id,age,codes", "patient_id,codes", "subject_id,gender,icd9_code",
           "patient_id,age,age,codes", "codes", "patient_id;codes", "", "\ufeffpatient_id,codes"]
CELLS = ["p1", "p2", "p1", "", "401.9", "4019", "250.00;272.4", "296.01@40", "296.01@x",
         "V58.61", "E888.9", "XYZ", "12345678", "-3", "131", "55", "nan", "NULL", '"a,b"',
         '"unterminated', "\x00", "é", "401.9 250.00", "@", ";;;", "1e9", " "]
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _csv_text() -> st.SearchStrategy[str]:
    row = st.lists(st.sampled_from(CELLS), min_size=0, max_size=5).map(",".join)
    return st.tuples(st.sampled_from(HEADERS), st.lists(row, max_size=6),
                     st.sampled_from(["\n", "\r\n"])).map(
        lambda t: t[2].join([t[0], *t[1]]))


def _loads_or_input_error(path: Path, **kwargs) -> None:
    try:
        ds = read_dataset(path, **kwargs)
    except InputError as exc:
        assert str(exc), "an InputError must say what is wrong"
        return
    assert ds.n_patients >= 1
    assert ds.patients.index.is_unique


@SETTINGS
@given(text=_csv_text())
def test_wide_csv_never_crashes(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.csv"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _loads_or_input_error(path)


@SETTINGS
@given(data=st.binary(max_size=300))
def test_random_bytes_as_csv_or_parquet_never_crash(tmp_path: Path, data: bytes) -> None:
    for name in ("fuzz.csv", "fuzz.parquet", "fuzz.tsv"):
        path = tmp_path / name
        path.write_bytes(data)
        _loads_or_input_error(path)


@SETTINGS
@given(ids=st.lists(st.sampled_from(["a", "b", "c", ""]), min_size=1, max_size=5),
       codes=st.lists(st.sampled_from(CELLS), min_size=1, max_size=5))
def test_wide_parquet_never_crashes(tmp_path: Path, ids: list[str], codes: list[str]) -> None:
    n = min(len(ids), len(codes))
    buf = io.BytesIO()
    pd.DataFrame({"patient_id": ids[:n], "codes": codes[:n]}).to_parquet(buf)
    path = tmp_path / "fuzz.parquet"
    path.write_bytes(buf.getvalue())
    _loads_or_input_error(path)


@SETTINGS
@given(patients=_csv_text(), diagnoses=_csv_text())
def test_long_tables_never_crash(tmp_path: Path, patients: str, diagnoses: str) -> None:
    p, d = tmp_path / "patients.csv", tmp_path / "diagnoses.csv"
    p.write_text(patients)
    d.write_text(diagnoses.replace("codes", "code"))
    _loads_or_input_error(p, diagnoses_path=d)
