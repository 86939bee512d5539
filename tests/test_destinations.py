"""Issue 15 item 7: a release lands only under the releases root, checked at request time and
again at publish, through symlinks."""

from __future__ import annotations

import pytest

from ehr_release.destinations import (
    DestinationError,
    check_still_there,
    resolve_destination,
)


@pytest.fixture
def root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("EHR_RELEASE_RELEASES_ROOT", str(root))
    return root


def test_a_symlink_out_of_the_root_is_refused(root, tmp_path) -> None:
    (root / "to-etc").symlink_to("/etc")
    with pytest.raises(DestinationError, match="outside the releases root"):
        resolve_destination(root / "to-etc")
    with pytest.raises(DestinationError):
        resolve_destination(root / ".." / "elsewhere")
    assert resolve_destination(root / "study-12") == (root / "study-12").resolve()
    assert resolve_destination(None) == root.resolve()


def test_a_destination_swapped_after_the_request_is_refused_at_publish(root) -> None:
    inside = root / "study"
    inside.mkdir()
    recorded = str(resolve_destination(inside))
    assert check_still_there(recorded) == inside.resolve()
    inside.rmdir()
    inside.symlink_to("/etc")  # swapped between request and approval
    with pytest.raises(DestinationError):
        check_still_there(recorded)


def test_the_cli_refuses_before_anything_runs(root, tmp_path, ehr_home) -> None:
    from typer.testing import CliRunner

    from ehr_release.cli import app
    from ehr_release.storage import runs

    data = tmp_path / "x.csv"
    data.write_text("patient_id,codes\nA,401.9\nB,401.9\n")
    (root / "to-etc").symlink_to("/etc")
    done = CliRunner().invoke(app, ["run", "--input", str(data), "--algorithm",
                                    "disassociation", "--param", "k=2", "--requester", "sam",
                                    "--out", str(root / "to-etc")])
    assert done.exit_code == 1 and "outside the releases root" in done.output
    assert runs.list_runs() == []
