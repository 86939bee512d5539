"""Issue 15 items 2 and 3: no patient value in anything stored, and hostile input sizes are
refused in seconds with one short line.

The steward's terminal may show the offending value (``str(error)``); the audit trail, the
run record and the flow log get :func:`~ehr_release.core.errors.stored_message`, which never
does. Each case here put a cell value or a data row into the trail before.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.core.errors import InputError, stored_message
from ehr_release.ingest import read_dataset
from ehr_release.storage.audit import export_events, record_event
from ehr_release.storage.runs import new_run_id


def _precheck_events(tmp_path: Path, text: str | bytes) -> tuple[str, str]:
    """(terminal message, every stored audit event) for a request on this file."""
    from ehr_release import service
    from ehr_release.planning.request import ReleaseRequest

    data = tmp_path / "extract.csv"
    data.write_bytes(text if isinstance(text, bytes) else text.encode())
    request = ReleaseRequest(run_id=new_run_id(), input_path=str(data),
                             algorithm="disassociation", params={"k": "2"},
                             requester="steward", out_dir=str(tmp_path / "out"))
    with pytest.raises(InputError) as caught:
        service.precheck(request)
    return str(caught.value), export_events(None, "jsonl")


@pytest.mark.parametrize(("text", "secret"), [
    ("patient_id,age,codes\nP1,MRN-4711,401.9\n", "MRN-4711"),        # a cell value
    ("P1,47,F,401.9 250.00\nP2,51,M,272.0\n", "401.9 250.00"),          # no header row
    ("patient_id,age,codes\nP1,47,V99.ZZ9\n", "V99.ZZ9"),               # a bad code
    ("q7xk,zztop,zztop\nP1,1,2\n", "zztop"),                          # header made of data
])
def test_ingest_refusal_names_where_not_what(any_db, tmp_path, text, secret) -> None:
    terminal, trail = _precheck_events(tmp_path, text)
    assert "ingest.rejected" in trail
    assert secret not in trail, trail
    assert "extract.csv" in trail  # the file is named
    assert secret.split()[0] in terminal  # the steward still sees it


def test_stored_message_of_a_bug_keeps_only_its_type() -> None:
    assert stored_message(KeyError("MRN-0042")) == "details in the run's flow log"
    assert stored_message(OSError(28, "No space left on device", "/x/MRN-0042.csv")) == \
        "No space left on device"


def test_audit_payload_strings_are_capped(any_db) -> None:
    record_event(actor="x", action="test.big", payload={"error": "v" * 1_000_000})
    line = export_events(None, "jsonl").splitlines()[-1]
    assert len(line) < 5_000 and "more characters cut" in json.loads(line)["payload"]["error"]


def test_a_file_without_newlines_is_refused_fast_and_briefly(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EHR_RELEASE_MAX_LINE_BYTES", "100000")
    data = tmp_path / "huge.csv"
    data.write_bytes(b"patient_id,codes," + b"x" * 20_000_000)
    started = time.perf_counter()
    with pytest.raises(InputError) as caught:
        read_dataset(data)
    assert time.perf_counter() - started < 5
    assert "line 1 is longer than 100,000 bytes" in str(caught.value)
    assert len(str(caught.value)) < 300


def test_a_million_columns_are_refused_before_parsing(tmp_path) -> None:
    """The issue's case (15 minutes at 2.9 GB before): its lines alone exceed the limit."""
    data = tmp_path / "wide.csv"
    data.write_text(",".join(f"c{i}" for i in range(1_000_000)) + "\n"
                    + ",".join("1" for _ in range(1_000_000)) + "\n")
    started = time.perf_counter()
    with pytest.raises(InputError, match="line 1 is longer than"):
        read_dataset(data)
    assert time.perf_counter() - started < 5


def test_too_many_columns_within_the_line_limit(tmp_path) -> None:
    data = tmp_path / "wide.csv"
    data.write_text(",".join(f"c{i}" for i in range(10_000)) + "\n"
                    + ",".join("1" for _ in range(10_000)) + "\n")
    with pytest.raises(InputError, match="10,000 columns, more than the 2,000"):
        read_dataset(data)


def test_an_overlong_field_is_named_by_row_and_position(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EHR_RELEASE_MAX_FIELD_CHARS", "50")
    data = tmp_path / "p.csv"
    data.write_text("patient_id,codes\nP1,401.9\nP2," + " ".join(["401.9"] * 20) + "\n")
    with pytest.raises(InputError) as caught:
        read_dataset(data)
    assert caught.value.row == 2 and "column 2" in caught.value.public()
    assert "401.9" not in caught.value.public()


def test_limits_from_the_environment_are_checked(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EHR_RELEASE_MAX_COLUMNS", "lots")
    data = tmp_path / "p.csv"
    data.write_text("patient_id,codes\nP1,401.9\n")
    with pytest.raises(InputError, match="EHR_RELEASE_MAX_COLUMNS must be a positive"):
        read_dataset(data)


def test_home_is_private_and_the_database_too(ehr_home, tmp_path, monkeypatch) -> None:
    from ehr_release.storage.engine import get_engine, home, reset_engines

    monkeypatch.delenv("EHR_RELEASE_DATABASE_URL")
    reset_engines()
    get_engine()
    assert stat.S_IMODE(home().stat().st_mode) == 0o700
    assert stat.S_IMODE((home() / "ehr_release.db").stat().st_mode) == 0o600
    os.chmod(home(), 0o755)
    assert stat.S_IMODE(home().stat().st_mode) == 0o700


@given(lines=st.lists(st.integers(0, 40), min_size=1, max_size=30),
       chunk=st.integers(1, 64), trailing_newline=st.booleans())
@settings(max_examples=200, deadline=None)
def test_the_streaming_scan_measures_lines_across_chunk_boundaries(
        tmp_path_factory, monkeypatch_module, lines, chunk, trailing_newline) -> None:
    """The NumPy scan finds the longest line and the first over-long one, wherever chunks
    split the file; the longest line is what lets the per-cell check be skipped."""
    from ehr_release.ingest import limits as lim

    monkeypatch_module.setattr(lim, "_CHUNK", chunk)
    body = "\n".join("x" * n for n in lines) + ("\n" if trailing_newline else "")
    path = tmp_path_factory.mktemp("scan") / "f.csv"
    path.write_text(body)
    assert lim.check_text_file(path, ",", lim.InputLimits()) == max(lines)
    cap = 20
    too_long = [i for i, n in enumerate(lines, start=1) if n > cap]
    if too_long:
        with pytest.raises(InputError, match=f"line {too_long[0]} is longer than 20 bytes"):
            lim.check_text_file(path, ",", lim.InputLimits(max_line_bytes=cap))
    else:
        assert lim.check_text_file(path, ",", lim.InputLimits(max_line_bytes=cap)) <= cap


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch
