"""Issue 15 item 7: a release lands only under the releases root, checked at request time and
again at publish, through symlinks."""

from __future__ import annotations

import pytest

from ehr_release.storage.destinations import (
    DestinationError,
    check_still_there,
    resolve_destination,
)


@pytest.fixture
def root(ehr_home, tmp_path, monkeypatch):
    """A fresh home whose releases root the variable initialises (it is the site's, stored
    on first use: see tests/test_site_settings.py)."""
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


def _refused_as_out(out, tmp_path, message: str) -> None:
    """``ehr-release run --out OUT`` exits 1 saying ``message``, and no run is recorded."""
    from typer.testing import CliRunner

    from ehr_release.cli import app
    from ehr_release.storage import runs

    data = tmp_path / "x.csv"
    data.write_text("patient_id,codes\nA,401.9\nB,401.9\n")
    done = CliRunner().invoke(app, ["run", "--input", str(data), "--algorithm",
                                    "disassociation", "--param", "k=2", "--requester", "sam",
                                    "--out", str(out)])
    assert done.exit_code == 1 and message in done.output
    assert runs.list_runs() == []


def test_the_cli_refuses_before_anything_runs(root, tmp_path, ehr_home) -> None:
    (root / "to-etc").symlink_to("/etc")
    _refused_as_out(root / "to-etc", tmp_path, "outside the releases root")


def test_a_destination_that_is_a_file_is_refused_at_request(root) -> None:
    """Else the whole pipeline runs, the reviewer approves, and publishing fails."""
    (root / "afile").write_text("x")
    for out in (root / "afile", root / "afile" / "study"):
        with pytest.raises(DestinationError, match=f"{root / 'afile'} is not a folder"):
            resolve_destination(out)
    (root / "study").mkdir()
    (root / "study" / "releases").write_text("x")
    with pytest.raises(DestinationError, match="its releases entry is not a folder"):
        resolve_destination(root / "study")


def test_a_destination_turned_into_a_file_is_refused_at_publish_in_one_line(root) -> None:
    from ehr_release.storage.destinations import releases_folder

    inside = root / "study"
    inside.mkdir()
    recorded = str(resolve_destination(inside))
    (inside / "releases").write_text("x")  # a file put in the way after the request
    with pytest.raises(DestinationError, match="its releases entry is not a folder"):
        releases_folder(recorded)
    (inside / "releases").unlink()
    inside.rmdir()
    inside.write_text("x")
    with pytest.raises(DestinationError, match="is not a folder"):
        releases_folder(recorded)


def test_the_cli_refuses_a_file_as_out_before_anything_runs(root, tmp_path, ehr_home) -> None:
    (root / "afile").write_text("x")
    _refused_as_out(root / "afile", tmp_path, "is not a folder")
    import json

    from ehr_release.storage.audit import export_events

    events = [json.loads(line) for line in export_events(None, "jsonl").splitlines()]
    refused = [e for e in events if e["action"] == "ingest.rejected"]
    assert len(refused) == 1 and "is not a folder" in refused[0]["payload"]["error"]
