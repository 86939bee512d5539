"""The ICD-10-CM copies of the examples' data (examples/data/*-icd10): what the script
writes, and the same patients and codes as the ICD-9 originals read with ``code_mapping: gem``."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from ehr_release.ingest.readers import read_dataset

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "examples" / "data"
COPIES = {"sample-icd10": REPO / "examples" / "demo" / "patients.csv",
          "mimic3-demo-icd10": DATA / "mimic3-demo"}


def test_the_shipped_copies_are_what_the_script_writes(tmp_path: Path) -> None:
    script = runpy.run_path(str(REPO / "scripts" / "write_icd10_examples.py"))
    script["main"](tmp_path)
    for name in COPIES:
        written = sorted(p.name for p in (tmp_path / name).iterdir())
        assert written == sorted(p.name for p in (DATA / name).iterdir())
        for file in written:
            assert (tmp_path / name / file).read_bytes() == (DATA / name / file).read_bytes()


@pytest.mark.parametrize("name", sorted(COPIES))
def test_a_copy_reads_as_its_original_mapped_by_the_option(name: str) -> None:
    copy = read_dataset(DATA / name / "patients.csv" if name == "sample-icd10" else DATA / name)
    original = read_dataset(COPIES[name], code_mapping="gem")
    assert copy.code_system == original.code_system == "icd10"
    assert copy.fingerprint() == original.fingerprint()
    assert read_dataset(COPIES[name]).code_system == "icd9"


def test_the_licence_and_the_mapping_are_documented() -> None:
    readme = (DATA / "README.md").read_text()
    for name in COPIES:
        assert f"`{name}/`" in readme
    assert "write_icd10_examples.py" in readme and "GEM" in readme
    assert (DATA / "mimic3-demo-icd10" / "LICENSE.txt").read_bytes() == (
        DATA / "mimic3-demo" / "LICENSE.txt").read_bytes()
