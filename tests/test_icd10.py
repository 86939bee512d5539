"""ICD-10-CM beside ICD-9-CM: the packaged hierarchy, detection, one-line refusals, documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from ehr_release.core.errors import InputError, stored_message
from ehr_release.documents.plain import code_edition
from ehr_release.ingest.preflight import preflight
from ehr_release.ingest.readers import read_dataset
from ehr_release.model.dataset import Dataset
from ehr_release.model.hierarchy import (
    CODE_SYSTEMS,
    code_hierarchy,
    icd10_hierarchy,
    normalize_icd10,
)


def test_icd10_hierarchy_has_the_icd9_levels() -> None:
    """chapter → block → category → subcategories, so 3digit/section/chapter keep meaning."""
    h = icd10_hierarchy()
    assert h.level["A00-B99"] == 1 and h.level["E08-E13"] == 2 and h.level["E11"] == 3
    assert h.ancestor_at_level("E11.9", 3) == "E11"
    assert h.ancestor_at_level("E11.9", 2) == "E08-E13"
    assert h.ancestor_at_level("E11.9", 1) == "E00-E89"
    assert h.level["S72.001A"] == 7  # 7th-character extensions are codes
    assert h.parent["B10"] == "B10-B10"  # a one-category block differs from its category
    assert "C00-C96" not in h  # a range of blocks holds no category: not a leaf
    assert all(h.level[c] == 1 for c in h.children[h.root])
    assert len(h.children[h.root]) == 22
    assert code_hierarchy("icd10") is h


def test_edition_is_recorded() -> None:
    assert CODE_SYSTEMS["icd10"].edition.startswith("ICD-10-CM ")
    assert "2015" in CODE_SYSTEMS["icd9"].edition
    assert code_edition({"codes": "multiset[icd10]+age"}) == CODE_SYSTEMS["icd10"].edition
    assert code_edition({"age": "Int64"}) is None


@pytest.mark.parametrize(("raw", "dotted"), [("E119", "E11.9"), (" e11.9 ", "E11.9"),
                                              ("S72001A", "S72.001A"), ("I10", "I10")])
def test_normalize_icd10(raw: str, dotted: str) -> None:
    assert normalize_icd10(raw) == dotted


def _wide(tmp_path: Path, codes: list[str]) -> Path:
    path = tmp_path / "wide.csv"
    rows = "".join(f"p{i},{40 + i},{c}\n" for i, c in enumerate(codes, start=1))
    path.write_text("patient_id,age,codes\n" + rows)
    return path


def test_icd10_extract_is_detected_and_dotted(tmp_path: Path) -> None:
    ds = read_dataset(_wide(tmp_path, ["E119;I10", "S72001A@50 E11.9"]))
    assert ds.code_system == "icd10"
    assert sorted(ds.diagnoses["code"]) == ["E11.9", "E11.9", "I10", "S72.001A"]
    assert ds.schema()["codes"] == "multiset[icd10]+age"


def test_icd9_extract_stays_icd9_with_its_old_fingerprint(tmp_path: Path) -> None:
    ds = read_dataset(_wide(tmp_path, ["250.01;401.9", "V45.81"]))
    assert ds.code_system == "icd9"
    same = Dataset(ds.patients, ds.diagnoses, code_system="icd9")
    other = Dataset(ds.patients, ds.diagnoses, code_system="icd10")
    assert same.fingerprint() == ds.fingerprint() != other.fingerprint()


@pytest.mark.parametrize("reader", [read_dataset, preflight])
def test_a_mixed_extract_is_refused_by_row(tmp_path: Path, reader) -> None:  # noqa: ANN001
    path = _wide(tmp_path, ["401.9", "E11.9", "250.00"])
    with pytest.raises(InputError, match=r"row 2, column 'codes': extract mixes ICD-9-CM "
                                         r"and ICD-10-CM codes \(row 1 is ICD-9-CM only"):
        reader(path)


@pytest.mark.parametrize("reader", [read_dataset, preflight])
def test_a_bad_icd10_code_has_the_icd9_message_shape(tmp_path: Path, reader) -> None:  # noqa: ANN001
    path = _wide(tmp_path, ["E11.9", "E11.9;Q99.99X"])
    with pytest.raises(InputError) as info:
        reader(path)
    assert str(info.value).endswith("row 2, column 'codes': malformed ICD-10 code: not a node "
                                    "of the ICD-10-CM hierarchy (found 'Q99.99X')")
    assert "Q99.99X" not in stored_message(info.value)


def test_the_mixed_message_keeps_no_code(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_dataset(_wide(tmp_path, ["401.9", "E11.9"]))
    assert "401.9" not in str(info.value) and "E11.9" not in str(info.value)


def test_a_declared_code_system_is_obeyed(tmp_path: Path) -> None:
    path = _wide(tmp_path, ["E119"])
    with pytest.raises(InputError, match="malformed ICD-9 code"):
        read_dataset(path, code_system="icd9")
    with pytest.raises(ValueError, match="unknown code system"):
        read_dataset(path, code_system="icd11")


@pytest.mark.parametrize(("declared", "message"), [
    ("icd9", "malformed ICD-9 code: not a node of the ICD-9-CM hierarchy"),
    ("icd11", "unknown code system 'icd11'"),
])
def test_cli_code_system_option_is_obeyed_and_audited(ehr_home, tmp_path: Path,
                                                      declared: str, message: str) -> None:
    """``run --code-system`` declares the extract's codes: an ICD-10 extract declared ICD-9
    is refused by row before anything starts, and the refusal is audited value-free."""
    import json

    from typer.testing import CliRunner

    from ehr_release.cli import app
    from ehr_release.storage.audit import export_events

    path = _wide(tmp_path, ["I10", "E119"])
    result = CliRunner().invoke(app, ["run", "--input", str(path), "--algorithm",
                                      "disassociation", "--param", "k=2", "--requester",
                                      "steward", "--code-system", declared, "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 1 and message in result.output
    events = [json.loads(x) for x in export_events(None, "jsonl").splitlines()]
    assert [e["action"] for e in events] == ["ingest.rejected"]
    assert "E119" not in events[0]["payload"]["error"]


def test_icd10_tree_is_well_formed() -> None:
    """What scripts/export_icd10cm_hierarchy.py promises of the exported file: levels step
    by one, every category is a 3-character code at level 3 under a block, and no block is
    a leaf (a leaf is a code a policy may put in a group)."""
    h = icd10_hierarchy()
    assert all(h.level[c] == h.level[p] + 1 for c, p in h.parent.items())
    assert all(len(c) == 3 and h.level[h.parent[c]] == 2
               for c, lvl in h.level.items() if lvl == 3)
    assert not [n for n, lvl in h.level.items() if lvl in (1, 2) and h.is_leaf(n)]
    assert all(normalize_icd10(c.replace(".", "")) == c
               for c, lvl in h.level.items() if lvl >= 3)


@pytest.mark.parametrize(("codes", "system"), [
    (["V01"], "icd9"),  # a node of both: an extract of such codes stays ICD-9 (the default)
    (["V01", "E11.9"], "icd10"),  # one ICD-10-only code decides
    (["401.9", "V01"], "icd9"),
])
def test_detection_rule(codes: list[str], system: str) -> None:
    from ehr_release.ingest.rules import detect_code_system

    assert detect_code_system(codes) == system
    assert detect_code_system(codes, "icd10") == "icd10"  # a declaration wins


def test_compare_code_system_option_is_obeyed(ehr_home, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ehr_release.cli import app

    path = _wide(tmp_path, ["I10", "E119"])
    result = CliRunner().invoke(app, ["compare", "--input", str(path), "--algorithm",
                                      "disassociation", "--param", "k=2", "--requester",
                                      "steward", "--code-system", "icd9", "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "malformed ICD-9 code: not a node of the ICD-9-CM hierarchy" in result.output


def test_gccens_population_in_the_other_code_system_is_refused(tmp_path: Path) -> None:
    import numpy as np

    from ehr_release import registry
    from ehr_release.samples.sample import generate_sample, write_sample

    write_sample(generate_sample(50, seed=3), tmp_path / "population.csv")  # ICD-9
    sample = generate_sample(20, seed=3, code_system="icd10")
    entry = registry.get("gccens")
    params = entry.parse({"k": "2", "population": str(tmp_path / "population.csv")})
    with pytest.raises(InputError, match="population is coded in icd9 but the extract in "
                                         "icd10"):
        entry.anonymize(sample, params, np.random.default_rng(1))
