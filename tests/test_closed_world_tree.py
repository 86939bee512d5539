"""Issue 32, finding 1: the closed world is the release folder's whole tree.

A hand-written release folder holding ``extra/ids.csv`` (a patient id and two of their
codes), a ``.git/`` folder or a ``.cache`` file verified for all five families ("1 file(s),
every field declared"): the folder reader kept only top-level, non-hidden regular files, so
the closed world never saw the rest — which the recipient copies with the folder. Each test
here plants one such entry beside an honest release of every family and expects the closed
world to fail, naming the entry's kind and position (never its name); all of them passed on
the reader as it was.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ehr_release import registry
from ehr_release.governance.pseudonyms import KEY_ENV
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.closed_world import closed_world_requirement
from ehr_release.privacy.release_files import read_release_files
from ehr_release.samples.sample import generate_sample, write_sample

SECRET = b"patient_id,code\nMRN-10006,296.01\nMRN-10006,401.9\n"


def _disassociation(tmp: Path) -> tuple[str, dict[str, bytes]]:
    from tests.test_parquet_closed_world import _disassociation

    return "disassociation", _disassociation()


def _diffgen(tmp: Path) -> tuple[str, dict[str, bytes]]:
    from tests.test_diffgen_counts_check import make_release

    return "diffgen", make_release(n=200, h=3)[0]


def _kkm(tmp: Path) -> tuple[str, dict[str, bytes]]:
    from tests.test_parquet_closed_world import _kkm

    return "artuc", _kkm()


def _gccens(tmp: Path) -> tuple[str, dict[str, bytes]]:
    from tests.test_gccens_closed_world import IDS, POPULATION, _release

    population = write_sample(Dataset.from_records(POPULATION, patient_ids=IDS),
                              tmp / "population.csv")
    return "gccens", _release(population)[3]


def _lda(tmp: Path) -> tuple[str, dict[str, bytes]]:
    from tests.test_lda_closed_world import _release

    return "lda", _release("lda", generate_sample(90, seed=3, longitudinal=True))[2]


FAMILIES: dict[str, Callable[[Path], tuple[str, dict[str, bytes]]]] = {
    "disassociation": _disassociation, "diffgen": _diffgen, "kkm": _kkm, "gccens": _gccens,
    "lda": _lda}


def _subfolder_file(folder: Path, files: dict[str, bytes]) -> None:
    (folder / "extra").mkdir()
    (folder / "extra" / "ids.csv").write_bytes(SECRET)


def _dotfile(folder: Path, files: dict[str, bytes]) -> None:
    (folder / ".cache").write_bytes(SECRET)


def _git_folder(folder: Path, files: dict[str, bytes]) -> None:
    (folder / ".git" / "objects").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/MRN-10006\n")


def _symlink(folder: Path, files: dict[str, bytes]) -> None:
    target = folder.parent / "outside.csv"
    target.write_bytes(SECRET)
    (folder / "ids.csv").symlink_to(target)


def _declared_symlink(folder: Path, files: dict[str, bytes]) -> None:
    """A declared file replaced by a link to a copy of its own honest bytes: the content
    checks pass, but a link can be pointed elsewhere after the check."""
    name = sorted(files)[0]
    target = folder.parent / "elsewhere"
    target.write_bytes(files[name])
    (folder / name).unlink()
    (folder / name).symlink_to(target)


def _fifo(folder: Path, files: dict[str, bytes]) -> None:
    os.mkfifo(folder / "pipe")


def _socket(folder: Path, files: dict[str, bytes]) -> None:
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(folder / "sock"))
    finally:
        sock.close()


def _empty_folder(folder: Path, files: dict[str, bytes]) -> None:
    (folder / "MRN-10006").mkdir()


PLANTS = {"subfolder file": _subfolder_file, "dotfile": _dotfile, ".git folder": _git_folder,
          "symlink": _symlink, "declared file as symlink": _declared_symlink, "FIFO": _fifo,
          "socket": _socket, "empty folder": _empty_folder}
KINDS = {"subfolder file": "a file in a subfolder", "dotfile": "a hidden file",
         ".git folder": "a folder", "symlink": "a symbolic link",
         "declared file as symlink": "is a symbolic link, not a regular file",
         "FIFO": "a FIFO", "socket": "a socket", "empty folder": "an empty folder"}


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> dict[str, tuple[str, dict[str, bytes]]]:
    tmp = tmp_path_factory.mktemp("families")
    os.environ.setdefault(KEY_ENV, "cd" * 32)  # LDA pseudonymizes under a site key
    return {family: make(tmp) for family, make in FAMILIES.items()}


def _folder(tmp_path: Path, files: dict[str, bytes]) -> Path:
    folder = tmp_path / "release"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "manifest.json").write_text(json.dumps({"run_id": "r"}))  # the envelope passes
    return folder


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_honest_release_folder_is_closed(releases, family, tmp_path) -> None:
    algorithm, files = releases[family]
    read = read_release_files(_folder(tmp_path, files))
    assert dict(read) == files
    requirement = closed_world_requirement(read, registry.get(algorithm).schema)
    assert requirement.passed, requirement.measured


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_entry_outside_the_declared_files_fails(releases, family, plant, tmp_path) -> None:
    algorithm, files = releases[family]
    folder = _folder(tmp_path, files)
    PLANTS[plant](folder, files)
    requirement = closed_world_requirement(read_release_files(folder),
                                           registry.get(algorithm).schema)
    assert not requirement.passed, requirement.measured
    stored = requirement.measured + repr(requirement.evidence)
    assert KINDS[plant] in stored, stored
    assert "10006" not in stored and "ids.csv" not in stored and ".git" not in stored


def test_every_entry_of_the_tree_is_counted_by_kind(tmp_path) -> None:
    from ehr_release.privacy.release_tree import walk_release

    folder = tmp_path / "release"
    folder.mkdir()
    (folder / "counts.json").write_text("{}")
    _subfolder_file(folder, {})
    _git_folder(folder, {})
    _fifo(folder, {})
    walked = walk_release(folder)
    assert set(walked) == {"counts.json"}
    assert [(s.path, s.kind) for s in walked.strays] == [
        (".git", "folder"), (".git/HEAD", "file in a subfolder"),
        (".git/objects", "empty folder"), ("extra", "folder"),
        ("extra/ids.csv", "file in a subfolder"), ("pipe", "FIFO")]


def test_a_link_to_a_folder_is_not_walked_into(tmp_path) -> None:
    from ehr_release.privacy.release_tree import walk_release

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.csv").write_bytes(SECRET)
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    assert [(s.path, s.kind) for s in walk_release(folder).strays] == [
        ("linked", "symbolic link")]


def test_verify_cli_fails_and_names_the_entry_to_its_operator(releases, tmp_path) -> None:
    """`ehr-release verify` on a folder with ``extra/ids.csv``: rc 1, the closed world
    fails in the JSON report (no name), and stderr names the path for whoever ran it."""
    from ehr_release.cli import app
    from tests.test_diffgen_counts_check import make_release

    files, data, params = make_release(n=200, h=3)
    folder = _folder(tmp_path, files)
    _subfolder_file(folder, files)
    original = write_sample(data, tmp_path / "original.csv")
    args = ["verify", "--algorithm", "diffgen", "--release", str(folder), "--original",
            str(original), "--param", "epsilon=1", "--param", "h=3", "--param",
            "taxonomies=mimic-demo", "--param", f"predictors={params['predictors']}",
            "--param", f"seed={params['seed']}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    closed = next(r for r in report["requirements"] if r["name"] == "closed world")
    assert not closed["passed"] and "file in a subfolder" in closed["measured"]
    assert "ids.csv" not in result.stdout
    assert "extra/ids.csv (file in a subfolder)" in result.stderr


# --------------------------------------------------------------------------- audit verify
def test_audit_verify_walks_the_published_folder_whole(ehr_home, tmp_path) -> None:
    """``audit verify`` names every entry of a published folder's tree that is not recorded
    (it listed only the top level: ``extra`` but never ``extra/ids.csv``)."""
    from ehr_release.governance.integrity import check_integrity
    from ehr_release.storage.engine import get_engine
    from tests.test_audit_anchored import _published

    engine = get_engine(f"sqlite:///{ehr_home / 'db.sqlite'}")
    run_id = _published(engine, tmp_path / "out")
    folder = tmp_path / "out" / "releases" / run_id
    assert check_integrity(engine)[0] == []
    _subfolder_file(folder, {})
    _git_folder(folder, {})
    _fifo(folder, {})
    problems = "\n".join(check_integrity(engine)[0])
    for entry in ("extra/ids.csv (file in a subfolder)", ".git/HEAD (file in a subfolder)",
                  ".git/objects (empty folder)", "pipe (FIFO)"):
        assert entry in problems, problems


def test_audit_verify_refuses_a_recorded_file_that_became_a_link(ehr_home, tmp_path) -> None:
    """A recorded file replaced by a link to a copy of its own bytes hashes the same; it is
    still not the file that was published (the link can be re-pointed at any time)."""
    from ehr_release.governance.integrity import check_integrity
    from ehr_release.storage.engine import get_engine
    from tests.test_audit_anchored import _published

    engine = get_engine(f"sqlite:///{ehr_home / 'db.sqlite'}")
    run_id = _published(engine, tmp_path / "out")
    manifest = tmp_path / "out" / "releases" / run_id / "manifest.json"
    copy = tmp_path / "copy.json"
    copy.write_bytes(manifest.read_bytes())
    manifest.unlink()
    manifest.symlink_to(copy)
    problems = "\n".join(check_integrity(engine)[0])
    assert "manifest.json is a symbolic link, not a regular file" in problems, problems


# --------------------------------------------------------------------------- publish
def test_publish_renames_only_a_folder_holding_exactly_its_files(env, monkeypatch) -> None:
    """An entry appearing in the staging folder beside the written files (a ``.DS_Store``,
    an ``extra/`` folder) is not renamed into place: nothing is published, and the run stays
    approved with the publication failure recorded (issue 33: publishing is retryable)."""
    from ehr_release.storage import runs
    from ehr_release.storage.runs import Status
    from ehr_release.tasks import publish
    from tests.flow_helpers import request_for, run_approved

    data, out = env
    real_write = publish.write_durably

    def and_a_stray(path, content, **kwargs):
        real_write(path, content, **kwargs)
        if path.parent.name.startswith(".staging-"):
            (path.parent / "extra").mkdir(exist_ok=True)
            (path.parent / "extra" / "ids.csv").write_bytes(SECRET)

    monkeypatch.setattr(publish, "write_durably", and_a_stray)
    req = request_for(data, out)
    run_approved(req)
    run = runs.get_run(req.run_id)
    assert run.status == Status.APPROVED, run.status
    assert "did not write" in run.error and "ids.csv" not in run.error
    assert not (out / "releases" / req.run_id).exists()
