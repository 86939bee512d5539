"""Issue 14, for every registered algorithm: a declared closed-world format, an attack audit
behind the wall, and format documentation that is the declaration itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ehr_release import registry
from ehr_release.documents.formats_doc import field_rows, formats_page
from ehr_release.privacy.closed_world import closed_world_requirement, violations

SRC = Path(__file__).resolve().parents[1] / "src" / "ehr_release"
DOC = Path(__file__).resolve().parents[1] / "docs" / "release-formats.md"
#: The model checks: an attack re-deriving their conclusions through their code would share
#: their bugs.
MODEL_CHECKS = {f"ehr_release.privacy.{m}" for m in (
    "disassociation", "kkm", "gccens", "lda", "diffgen", "itemset_counts", "json_lines")}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("name", registry.names())
def test_every_algorithm_declares_format_attack_and_record_count(name: str) -> None:
    entry = registry.get(name)
    assert entry.schema is not None, f"{name}: no closed-world schema"
    assert entry.attack is not None, f"{name}: no attack audit"
    assert entry.count_records is not None, f"{name}: no record count"


@pytest.mark.parametrize("path", sorted((SRC / "privacy" / "attacks").glob("*.py"))
                         + sorted((SRC / "privacy" / "formats").glob("*.py")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_attacks_and_formats_stay_behind_the_wall(path: Path) -> None:
    imports = _imports(path)
    assert not {i for i in imports if i.startswith("ehr_release.algorithms")}, path.name
    if path.parent.name == "attacks":
        assert not {i for i in imports if i in MODEL_CHECKS or
                    any(i.startswith(m + ".") for m in MODEL_CHECKS)}, path.name


@pytest.mark.parametrize("name", registry.names())
def test_every_published_field_has_its_review(name: str) -> None:
    schema = registry.get(name).schema
    assert schema is not None
    for file in schema.files:
        assert file.doc, f"{name}/{file.name}: no description"
        unreviewed = [r.path for r in field_rows(file) if not r.review]
        assert not unreviewed, f"{name}/{file.name}: fields without a review: {unreviewed}"


@pytest.mark.parametrize("name", registry.names())
def test_an_undeclared_file_fails_the_closed_world(name: str) -> None:
    """Finding 4: a stray file (say, raw code sets) fails, whatever else is there — by its
    position, never its name, which could itself carry a value (here a patient's id)."""
    schema = registry.get(name).schema
    assert schema is not None
    files = {"patient_10006.txt": b"401.9 250.00\n"}
    found = list(violations(files, schema))
    assert any(f.startswith("1 undeclared file at position 1 ") for f in found), found
    requirement = closed_world_requirement(files, schema)
    assert not requirement.passed
    assert "10006" not in requirement.measured + repr(requirement.evidence)


def test_a_release_without_a_schema_fails_closed() -> None:
    assert not closed_world_requirement({"release.json": b"{}"}, None).passed


def test_format_documentation_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == formats_page(), (
        "docs/release-formats.md is stale: run "
        "`.venv/bin/python -m ehr_release.documents.formats_doc > docs/release-formats.md`")


def test_every_row_of_the_format_docs_names_its_check() -> None:
    """Issue 32: for every field, order and rendering row, which check pins it down — the
    closed world, a verifier requirement, the attack audit. No row is left NOT CHECKED (the
    last three, disassociation's cluster order, chunk order and the clusters' part of the
    row order, are pinned by the replay of HorPart, VerPart and Refine)."""
    from ehr_release.privacy.closed_world import NOT_CHECKED

    unchecked: set[tuple[str, str, str]] = set()
    for name in registry.names():
        schema = registry.get(name).schema
        assert schema is not None
        for file in schema.files:
            for row in field_rows(file):
                assert row.checked_by, f"{name}/{file.name}: row {row.path!r} names no check"
                if NOT_CHECKED in row.checked_by:
                    unchecked.add((name, file.name, row.path))
    assert unchecked == set()
    assert f"**{NOT_CHECKED}**" not in formats_page()  # how the page marks an unchecked row
