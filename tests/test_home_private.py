"""Issue 33 item 8, in small: the helpers that keep the home 0600/0700 (the end-to-end walk
is ``tests/test_e2e_cli.py::test_nothing_in_the_home_is_readable_by_others``)."""

from __future__ import annotations

import os
from pathlib import Path

from ehr_release.storage.home import make_private, private_dir


def test_private_dir_makes_every_missing_parent_0700(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        leaf = private_dir(tmp_path / "runs" / "rel-1" / "candidate")
    finally:
        os.umask(old)
    for folder in (tmp_path / "runs", tmp_path / "runs" / "rel-1", leaf):
        assert folder.stat().st_mode & 0o777 == 0o700, folder


def test_make_private_tightens_the_tree_but_follows_no_link(tmp_path: Path) -> None:
    home, outside = tmp_path / "home", tmp_path / "outside.txt"
    (home / "prefect" / "storage").mkdir(parents=True, mode=0o755)
    result = home / "prefect" / "storage" / "result.pickle"
    result.write_bytes(b"x")
    result.chmod(0o644)
    script = home / "tool"
    script.write_bytes(b"#!/bin/sh\n")
    script.chmod(0o755)
    outside.write_text("not ours to change")
    outside.chmod(0o644)
    (home / "link").symlink_to(outside)
    make_private(home)
    assert result.stat().st_mode & 0o777 == 0o600
    assert script.stat().st_mode & 0o777 == 0o700  # the owner's bits are kept
    assert (home / "prefect" / "storage").stat().st_mode & 0o777 == 0o700
    assert outside.stat().st_mode & 0o777 == 0o644
    make_private(tmp_path / "missing")  # nothing to do, no error
