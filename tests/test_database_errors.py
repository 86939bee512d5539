"""Issue 15 item 8: a database that is down or a wrong URL gives one line naming where (no
password), not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql+psycopg://bob:s3cret@127.0.0.1:5999/nope",
     "cannot use the database (postgresql at 127.0.0.1:5999/nope)"),
    ("nonsense://x", "EHR_RELEASE_DATABASE_URL is not usable"),
    ("::::", "EHR_RELEASE_DATABASE_URL is not a valid database URL"),
])
def test_database_failure_is_one_line(tmp_path, url: str, expected: str) -> None:
    env = {**os.environ, "EHR_RELEASE_DATABASE_URL": url,
           "EHR_RELEASE_HOME": str(tmp_path / "home")}
    for command in (["list"], ["status", "rel-" + "0" * 32], ["audit", "verify"]):
        done = subprocess.run([sys.executable, "-m", "ehr_release.cli", *command], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], done.stderr
        assert "s3cret" not in done.stderr and "Traceback" not in done.stderr
