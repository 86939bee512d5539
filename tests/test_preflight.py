"""The CLI's preflight refuses exactly what the full reader refuses, with the same message.

The preflight (standard-library ``csv``) exists so a bad file is refused before pandas loads;
it must never refuse a file the full reader accepts, nor word a refusal differently. A
differential property test feeds both readers the same generated extracts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release.core.errors import InputError
from ehr_release.ingest import read_dataset
from ehr_release.ingest.preflight import preflight

IDS = st.sampled_from(["p1", "p2", "p3", "", "P1", "p 4"])
AGES = st.sampled_from(["", "63", "63.0", "7", "abc", "-1", "131", "1e1", "nan", "inf",
                        "1_0", "\u0663", "40.5", "+5", ".5e2"])
CODES = st.sampled_from(["401.9", "4019", "250.01", "999.999", "V45.81", "E849.7", "ROOT",
                         "401.9@63", "250@abc", "@63", "428.0@131", "v4581", "x"])
CELLS = st.sampled_from(["WHITE", "", "a b", "\"q\"", "F"])


def _row(fields: list[str]) -> str:
    return ",".join(fields)


@st.composite
def wide_files(draw: st.DrawFn) -> tuple[str, str | None]:
    header = ["patient_id", "age", "gender", "codes"]
    if draw(st.booleans()):
        header = draw(st.permutations(header))
    if draw(st.integers(0, 9)) == 0:
        header = [h for h in header if h != draw(st.sampled_from(header))]
    if draw(st.integers(0, 9)) == 0:
        header = [*header, "Codes"]  # a second 'codes' after canonical names
    lines = [_row(header)]
    for _ in range(draw(st.integers(0, 6))):
        cells = {"patient_id": draw(IDS), "age": draw(AGES), "gender": draw(CELLS),
                 "codes": draw(st.lists(CODES, max_size=3)).__iter__()}
        sep = draw(st.sampled_from([";", " ", "; "]))
        values = [sep.join(cells["codes"]) if h.lower() == "codes" else str(cells[h])
                  for h in header]
        if draw(st.integers(0, 14)) == 0:
            values = values[:-1]  # a ragged row
        lines.append(_row(values))
        if draw(st.integers(0, 14)) == 0:
            lines.append("")
    class_column = draw(st.sampled_from([None, "gender", "missing", "codes"]))
    return "\n".join(lines) + "\n", class_column


@st.composite
def long_files(draw: st.DrawFn) -> tuple[str, str]:
    patients = ["patient_id,age,gender"]
    for pid in draw(st.lists(IDS, max_size=4, unique=draw(st.booleans()))):
        age = draw(st.sampled_from(["50", "7", ""]) if draw(st.booleans()) else AGES)
        patients.append(_row([pid, age, draw(CELLS)]))
    diag_header = draw(st.sampled_from(["patient_id,code,age", "patient_id,code",
                                        "subject_id,icd9_code", "patient_id,age"]))
    diagnoses = [diag_header]
    width = diag_header.count(",") + 1
    for _ in range(draw(st.integers(0, 5))):
        fields = [draw(IDS), draw(CODES).split("@")[0], draw(AGES)][:width]
        diagnoses.append(_row(fields))
    return "\n".join(patients) + "\n", "\n".join(diagnoses) + "\n"


def _full_reader_error(*args: Path | None, class_column: str | None = None) -> str | None:
    try:
        read_dataset(args[0], args[1], class_column=class_column)
    except InputError as exc:
        return str(exc)
    return None


def _preflight_error(*args: Path | None, class_column: str | None = None) -> str | None:
    try:
        preflight(args[0], args[1], class_column=class_column)
    except InputError as exc:
        return str(exc)
    return None


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(wide_files())
def test_wide_preflight_agrees_with_full_reader(tmp_path: Path,
                                                case: tuple[str, str | None]) -> None:
    text, class_column = case
    path = tmp_path / "wide.csv"
    path.write_text(text, encoding="utf-8")
    early = _preflight_error(path, None, class_column=class_column)
    if early is not None:
        assert _full_reader_error(path, None, class_column=class_column) == early


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(long_files())
def test_long_preflight_agrees_with_full_reader(tmp_path: Path, case: tuple[str, str]) -> None:
    patients, diagnoses = tmp_path / "patients.csv", tmp_path / "diagnoses.csv"
    patients.write_text(case[0], encoding="utf-8")
    diagnoses.write_text(case[1], encoding="utf-8")
    early = _preflight_error(patients, diagnoses)
    if early is not None:
        assert _full_reader_error(patients, diagnoses) == early


@pytest.mark.parametrize(("row", "message"), [
    ("p9,abc,F,401.9", "row 3, column 'age': age is not a number"),
    ("p9,131,F,401.9", "row 3, column 'age': age must be a whole number from 0 to 130"),
    ("p9,40,F,401.9;999.999", "row 3, column 'codes': malformed ICD-9 code"),
    ("p1,40,F,401.9", "row 3, column 'patient_id': duplicate patient id (same as row 1)"),
])
def test_preflight_names_row_and_column(tmp_path: Path, row: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(f"patient_id,age,gender,codes\np1,50,F,250.01\np2,60,M,401.9\n{row}\n")
    with pytest.raises(InputError, match=re.escape(message)):
        preflight(path)


def test_preflight_leaves_undecidable_files_to_the_full_reader(tmp_path: Path) -> None:
    """A ragged row: pandas has its own words for it, so the preflight says nothing."""
    path = tmp_path / "ragged.csv"
    path.write_text("patient_id,age,codes\np1,50,250.01\np2,60,401.9,extra,more\n")
    preflight(path)
    with pytest.raises(InputError, match="cannot be parsed"):
        read_dataset(path)


def test_a_file_over_the_preflight_size_is_refused_by_the_full_reader_alike(
        tmp_path: Path) -> None:
    """Over ``MAX_PREFLIGHT_BYTES`` the pass would cost a good file more than it saves a bad
    one: it says nothing and the full reader words the same refusal; just under, it refuses."""
    from ehr_release.ingest.preflight import MAX_PREFLIGHT_BYTES

    header, good = "patient_id,age,codes\n", "p{},50,250.01;401.9\n"
    bad = "q1,40,999.999\n"
    rows = (MAX_PREFLIGHT_BYTES - len(header) - len(bad)) // len(good.format(100000))

    def extract(name: str, n_good: int) -> tuple[Path, str]:
        """A file of ``n_good`` good rows then the bad one, and the refusal naming it."""
        path = tmp_path / name
        path.write_text(header + "".join(good.format(100000 + i) for i in range(n_good)) + bad)
        return path, re.escape(f"row {n_good + 1}, column 'codes': malformed ICD-9 code")

    under, refusal = extract("under.csv", rows)
    assert under.stat().st_size <= MAX_PREFLIGHT_BYTES
    with pytest.raises(InputError, match=refusal):
        preflight(under)
    over, refusal = extract("over.csv", rows + rows // 10)
    assert over.stat().st_size > MAX_PREFLIGHT_BYTES
    preflight(over)
    with pytest.raises(InputError, match=refusal):
        read_dataset(over)


def test_cli_refuses_a_bad_file_without_loading_pandas(tmp_path: Path) -> None:
    """The point of the preflight: the refusal (and its audit event) needs no pandas."""
    bad = tmp_path / "bad.csv"
    bad.write_text("patient_id,age,codes\np1,50,250.01\np2,abc,401.9\n")
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('PANDAS LOADED:', 'pandas' in sys.modules))\n"
             "from ehr_release.cli import app\n"
             "app()\n")
    env = {**os.environ, "EHR_RELEASE_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", probe, "run", "--input", str(bad), "--algorithm",
         "disassociation", "--param", "k=3", "--requester", "steward.sam"],
        capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 1
    assert "row 2, column 'age': age is not a number" in done.stderr
    assert "PANDAS LOADED: False" in done.stdout
    audit = subprocess.run(
        [sys.executable, "-m", "ehr_release.cli", "audit", "export"],
        capture_output=True, text=True, env=env, timeout=120, check=False)
    assert "ingest.rejected" in audit.stdout


def test_every_algorithms_parameters_are_checked_without_pandas() -> None:
    """Registry entries are declarations: parsing parameters loads no anonymizer, verifier
    or pandas, so a bad parameter is refused as fast as a bad file (issue 16)."""
    probe = ("import sys\n"
             "from ehr_release import registry\n"
             "from ehr_release.core.errors import EhrReleaseError\n"
             "for name in registry.names():\n"
             "    try:\n"
             "        registry.get(name).parse({'k': '1', 'epsilon': '-1'})\n"
             "    except EhrReleaseError:\n"
             "        pass\n"
             "    assert 'pandas' not in sys.modules, name\n"
             "print('checked', len(registry.names()))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "checked" in done.stdout


def test_choices_spelled_in_the_registry_match_the_anonymizers() -> None:
    """The registry repeats a few choice lists so parsing stays light; they must agree."""
    from ehr_release.algorithms.artuc.merging import MERGE_ORDERS, STOP_RULES
    from ehr_release.algorithms.rmr import CODE_MODELS
    from ehr_release.registry import artuc, rmr

    assert artuc.STOP_RULES == STOP_RULES and rmr.CODE_MODELS == CODE_MODELS
    assert artuc.MERGE_ORDERS == MERGE_ORDERS


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_a_short_row_is_refused_by_both_readers_naming_its_row(tmp_path: Path,
                                                               suffix: str) -> None:
    """A row with fewer fields than the header (a truncated line) is not padded with empty
    values and released without its codes: both readers refuse it, naming the row only."""
    sep = "\t" if suffix == ".tsv" else ","
    path = tmp_path / f"short{suffix}"
    rows = [["patient_id", "age", "gender", "codes"], ["p1", "50", "F", "250.01"], [],
            ["p2", "61"], ["p3", "70", "M", ""]]
    path.write_text("".join(sep.join(r) + "\n" for r in rows))
    message = f"file {path}, row 2: has 2 fields where the header has 4"
    with pytest.raises(InputError) as early:
        preflight(path)
    with pytest.raises(InputError) as full:
        read_dataset(path)
    assert str(early.value) == str(full.value) == message


def test_a_named_pipe_is_refused_before_anything_reads_it(tmp_path: Path) -> None:
    """Opening a FIFO named like an extract blocks until a writer comes: the CLI hung."""
    from ehr_release.ingest.rules import check_path

    fifo = tmp_path / "extract.csv"
    os.mkfifo(fifo)
    message = f"file {fifo}: is not a regular file"
    with pytest.raises(InputError, match=re.escape(message)):
        check_path(fifo)  # no read attempted: before the check this returned ".csv"
    with pytest.raises(InputError, match=re.escape(message)):
        preflight(fifo)
    with pytest.raises(InputError, match=re.escape(message)):
        read_dataset(fifo)
