"""`ehr-release verify` without `--original` (issue 32): a recipient or an outside auditor
runs the checks the release alone allows, and the report says which it could not run."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.configuration.policies import resolve_policy
from ehr_release.model.dataset import Dataset

from .disassociation_layout import files_of, in_documented_order, read_doc
from .test_disassociation_replay import EXAMPLE, _algorithm_release

runner = CliRunner()
POLICY = "hierarchy:section"


def _release(tmp_path: Path, *, reverse_chunks: bool = False) -> Path:
    records = [r.split() for r in EXAMPLE]
    owner = dict(resolve_policy(POLICY, Dataset.from_records(records)).constraint_of())
    files = _algorithm_release(records, owner, 3, 2, 6)
    if reverse_chunks:
        doc = read_doc(files["release.parquet"])
        cluster = next(c for c in doc["clusters"] if len(c["record_chunks"]) >= 2)
        cluster["record_chunks"].reverse()
        files = files_of(in_documented_order(doc))
    path = tmp_path / "release.parquet"
    path.write_bytes(files["release.parquet"])
    return path


def _verify(path: Path) -> tuple[int, str, str]:
    result = runner.invoke(app, ["verify", "--release", str(path), "--algorithm",
                                 "disassociation", "--param", "k=3", "--param", "m=2",
                                 "--param", f"policy={POLICY}"])
    return result.exit_code, result.stdout, result.stderr


def test_an_honest_release_verifies_without_the_original_and_lists_what_did_not_run(
        tmp_path: Path) -> None:
    code, out, err = _verify(_release(tmp_path))
    assert code == 0, err
    report = json.loads(out)
    assert report["mode"] == "without the original"
    assert "choices replayed" in report["not_run"]
    assert "chunk order (from the bytes)" in [r["name"] for r in report["requirements"]]
    assert "checked without the original" in err


def test_a_recipient_refuses_reordered_chunks(tmp_path: Path) -> None:
    code, out, err = _verify(_release(tmp_path, reverse_chunks=True))
    assert code == 1
    assert "NOT verified" in err and "chunk order" in err


def test_other_families_name_the_missing_original(tmp_path: Path) -> None:
    path = tmp_path / "release.csv"
    path.write_text("id,codes\n")
    result = runner.invoke(app, ["verify", "--release", str(path), "--algorithm", "lda",
                                 "--param", "k=5"])
    assert result.exit_code != 0
    assert "--original" in result.stderr
