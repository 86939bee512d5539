"""Whole-table limits: rows, cells, bytes as read, memory budget (issue 33 part 3).

An 848 KB Parquet file of 30M rows was read until the CLI was killed at 10.5 GB, and its
detached flow process went on; a 10M-row CSV ran for minutes with no limit. Every table of
every shape is now refused before it is read, with one line naming the file and the limit,
by the CLI's preflight and again by the full reader the flow's ingest uses.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ehr_release.core.errors import InputError
from ehr_release.flows.spawn import end_process_group
from ehr_release.ingest.preflight import preflight
from ehr_release.ingest.readers import read_dataset

SRC = Path(__file__).resolve().parents[1] / "src"
ROWS = 2_000


def _write(tmp_path: Path, suffix: str, rows: int = ROWS) -> Path:
    """A valid wide extract of ``rows`` patients (every reader would accept it)."""
    ids = [f"P{i}" for i in range(rows)]
    table = pa.table({"patient_id": ids, "age": ["63"] * rows, "codes": ["401.9;250.00"] * rows})
    path = tmp_path / f"wide{suffix}"
    if suffix == ".parquet":
        pq.write_table(table, path)
    else:
        sep = "\t" if suffix == ".tsv" else ","
        lines = [sep.join(table.column_names)]
        lines += [sep.join(r) for r in zip(*(c.to_pylist() for c in table.columns), strict=True)]
        path.write_text("\n".join(lines) + "\n")
    return path


LIMITS = [  # (variable, value that refuses the 2,000 × 3 table, words of the refusal)
    ("EHR_RELEASE_MAX_ROWS", "1999", "rows"),
    ("EHR_RELEASE_MAX_CELLS", "5999", "cells"),
    ("EHR_RELEASE_MAX_INPUT_BYTES", "1000", "bytes"),
    ("EHR_RELEASE_MEMORY_BUDGET_MB", "1", "memory budget"),
]


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet"])
@pytest.mark.parametrize(("env", "value", "words"), LIMITS)
def test_each_limit_refuses_each_format_in_preflight_and_full_reader(
        tmp_path, monkeypatch, suffix, env, value, words):
    path = _write(tmp_path, suffix)
    read_dataset(path)  # within the default limits it is read
    monkeypatch.setenv(env, value)
    for reader in (preflight, read_dataset):
        with pytest.raises(InputError) as refused:
            reader(path)
        message = str(refused.value)
        assert str(path) in message and env in message and words in message
        assert "\n" not in message


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_table_at_the_row_limit_is_read(tmp_path, monkeypatch, suffix):
    path = _write(tmp_path, suffix)
    monkeypatch.setenv("EHR_RELEASE_MAX_ROWS", str(ROWS))
    monkeypatch.setenv("EHR_RELEASE_MAX_CELLS", str(ROWS * 3))
    preflight(path)
    assert read_dataset(path).n_patients == ROWS


def test_long_and_admissions_tables_are_bounded_too(tmp_path, monkeypatch):
    """The preflight leaves a long extract with admissions to the full reader, but not a
    table too large to read."""
    pats = tmp_path / "patients.csv"
    pats.write_text("patient_id,birth_date\nP1,1950-01-01\n")
    diag = tmp_path / "diagnoses.csv"
    diag.write_text("patient_id,code,admission\n" + "P1,401.9,A1\n" * 50)
    adm = tmp_path / "admissions.parquet"

    def admissions(rows: int) -> None:
        pq.write_table(pa.table({"admission": [f"A{i}" for i in range(1, rows + 1)],
                                 "patient_id": ["P1"] * rows,
                                 "admit_date": ["2000-01-01"] * rows}), adm)

    admissions(1)
    monkeypatch.setenv("EHR_RELEASE_MAX_ROWS", "40")
    with pytest.raises(InputError, match="diagnoses.csv.*EHR_RELEASE_MAX_ROWS"):
        preflight(pats, diag, admissions_path=adm)
    diag.write_text("patient_id,code,admission\nP1,401.9,A1\n")
    admissions(50)
    with pytest.raises(InputError, match="admissions.parquet.*EHR_RELEASE_MAX_ROWS"):
        preflight(pats, diag, admissions_path=adm)
    with pytest.raises(InputError, match="admissions.parquet.*EHR_RELEASE_MAX_ROWS"):
        read_dataset(pats, diag, admissions_path=adm)


def test_a_bad_limit_setting_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("EHR_RELEASE_MEMORY_BUDGET_MB", "lots")
    with pytest.raises(InputError, match="EHR_RELEASE_MEMORY_BUDGET_MB must be a positive"):
        read_dataset(_write(tmp_path, ".csv"))


def _thirty_million_rows(path: Path) -> Path:
    """The issue's file: 30M rows in well under a megabyte (every value the same)."""
    n = 30_000_000
    zeros = pa.array(np.zeros(n, dtype=np.int32))
    pq.write_table(pa.table({c: pa.DictionaryArray.from_arrays(zeros, pa.array([v]))
                             for c, v in (("patient_id", "P1"), ("age", "63"),
                                          ("codes", "401.9"))}), path, compression="zstd")
    return path


def _limit_memory() -> None:  # the child may not take the machine down (old code: 10.5 GB)
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.slow
def test_the_cli_refuses_a_thirty_million_row_parquet_file_at_once(tmp_path):
    """With the default limits: one line naming the file and EHR_RELEASE_MAX_ROWS, within
    seconds, and no flow process left behind (none was started)."""
    data = _thirty_million_rows(tmp_path / "many.parquet")
    assert data.stat().st_size < 1 << 20
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EHR_RELEASE_MAX")}
    env.update(EHR_RELEASE_HOME=str(home), EHR_RELEASE_DATABASE_URL=f"sqlite:///{home}/db",
               PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.pop("EHR_RELEASE_MEMORY_BUDGET_MB", None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ehr_release.cli", "run", "--input", str(data), "--algorithm",
         "disassociation", "--param", "k=2", "--param", "m=2", "--requester", "steward",
         "--out", str(tmp_path / "out")], env=env, capture_output=True, text=True,
        timeout=300, preexec_fn=_limit_memory)
    took = time.monotonic() - started
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 1
    assert len(errors) == 1 and str(data) in errors[0] and "EHR_RELEASE_MAX_ROWS" in errors[0]
    assert "30,000,000 rows" in errors[0]
    assert took < 30  # seconds, on a loaded 2-core machine; about 1-2 s idle
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


_BUSY = """
import multiprocessing, time
def child():
    time.sleep(120)
if __name__ == "__main__":
    multiprocessing.Process(target=child, daemon=True).start()
    print("ready", flush=True)
    time.sleep(120)  # never reads stdin: like a head start busy reading a huge file
"""


def test_calling_off_a_busy_flow_process_ends_it_and_its_children(tmp_path):
    """A refused request's flow process ends with the refusal, even one that is not
    reading its stdin (busy with its head start), and so does its second process."""
    script = tmp_path / "busy.py"
    script.write_text(_BUSY)
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    from ehr_release.flows.spawn import call_off

    started = time.monotonic()
    call_off(proc, "rel-called-off")
    assert proc.poll() is not None and time.monotonic() - started < 6
    time.sleep(0.5)
    assert _live_members(proc.pid) == []  # no process of its group is left


def _live_members(group: int) -> list[int]:
    """Processes of process group ``group`` that still run (zombies awaiting init do not)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def test_end_process_group_of_an_ended_process_is_harmless():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    end_process_group(proc)


def test_a_mimic_folder_is_bounded_table_by_table(shared_data, monkeypatch):
    """A MIMIC folder's tables are bounded too; files the reader ignores are not checked."""
    folder = shared_data / "mimic3-demo"
    monkeypatch.setenv("EHR_RELEASE_MAX_ROWS", "500")  # the demo's DIAGNOSES_ICD has more
    for reader in (preflight, read_dataset):
        with pytest.raises(InputError, match="DIAGNOSES_ICD.csv.*EHR_RELEASE_MAX_ROWS"):
            reader(folder)
    monkeypatch.setenv("EHR_RELEASE_MAX_ROWS", "2000")  # D_ICD_DIAGNOSES (14,567) is unread
    preflight(folder)
    assert read_dataset(folder).n_patients == 100


def test_the_flows_own_ingest_refuses_a_table_over_the_limits(env, tmp_path, monkeypatch):
    """The release flow trusts no caller: its ingest stage refuses the table itself, with
    the run's only audit event naming the limit, and no run."""
    import json

    from ehr_release.storage import runs
    from ehr_release.storage.audit import export_events
    from tests.flow_helpers import request_for, start

    data, out = env
    monkeypatch.setenv("EHR_RELEASE_MAX_ROWS", "3")
    thread, box = start(request_for(data, out))
    thread.join(120)
    assert isinstance(box.get("error"), InputError)
    assert "EHR_RELEASE_MAX_ROWS" in str(box["error"])
    assert runs.list_runs() == []
    events = [e for e in map(json.loads, export_events(None, "jsonl").splitlines())
              if not e["action"].startswith("site.")]  # the fixture's test site, settings
    assert [e["action"] for e in events] == ["ingest.rejected"]
    assert "EHR_RELEASE_MAX_ROWS" in events[0]["payload"]["error"]
