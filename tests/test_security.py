"""Path traversal, guessable ids and unsafe names are refused where they enter."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.core.errors import EhrReleaseError
from ehr_release.core.files import check_safe_name
from ehr_release.planning.request import ReleaseRequest
from ehr_release.privacy.release_files import check_release_names
from ehr_release.storage.runs import new_run_id

TRAVERSALS = ["../x", "..", "a/b", "a\\b", "/etc/passwd", ".staging-x", "", "a\x00b",
              "rel-../../etc", "~root", "C:evil"]


def test_run_ids_are_unguessable_and_path_safe() -> None:
    ids = {new_run_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(re.fullmatch(r"rel-[0-9a-f]{32}", i) for i in ids)


@pytest.mark.parametrize("run_id", ["rel-../../etc/passwd", "../rel-" + "0" * 32,
                                    "rel-" + "G" * 32, "rel-" + "0" * 31])
def test_request_refuses_crafted_run_ids(run_id: str) -> None:
    with pytest.raises(ValidationError):
        ReleaseRequest(run_id=run_id, input_path="x.csv", algorithm="a", requester="s",
                       out_dir="out")


@pytest.mark.parametrize("name", TRAVERSALS)
def test_unsafe_file_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        check_safe_name(name)


def test_release_names_may_not_escape_or_replace_the_envelope() -> None:
    check_release_names("a", {"release.json": b"{}"})
    for bad in ("../release.json", "manifest.json", "certificate.pdf", ".hidden"):
        with pytest.raises(EhrReleaseError, match="algorithm 'a'"):
            check_release_names("a", {bad: b"{}"})
    with pytest.raises(EhrReleaseError, match="no release files"):
        check_release_names("a", {})


@pytest.mark.parametrize("command", [["status"], ["approve", "--reviewer", "r", "--decision",
                                                  "approve", "--reason", "x"]])
def test_cli_refuses_traversal_in_run_ids(ehr_home, command: list[str]) -> None:
    result = CliRunner().invoke(app, [command[0], "../../etc/passwd", *command[1:]])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
