"""A home's first Prefect server starts on a migrated template (issue 37 goal 2).

A fresh home's server spent about 8 of its 17–19 s migrating an empty SQLite file, and
2–4 CPU s registering block types; the template made at install holds both. These tests
check that the copy is made only where Prefect would create that file itself, and that a
real server told to skip both steps serves the API, block types included, from it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest

from ehr_release.flows import prefect_database as db
from ehr_release.flows.server import _wait_healthy, server_command, server_env
from tests.flow_helpers import free_port


def _fake_template(cache: Path) -> Path:
    path = db.template_path(cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"template bytes")
    return path


def test_the_copy_is_made_only_where_prefect_would_create_the_file(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    home = tmp_path / "prefect"
    fresh = {"PREFECT_HOME": str(home)}
    assert db.seed_from_template(fresh, cache) is False  # no template yet: Prefect migrates
    _fake_template(cache)
    for configured in ({"PREFECT_API_DATABASE_CONNECTION_URL": "postgresql://x/y"},
                       {"PREFECT_SERVER_DATABASE_CONNECTION_URL": "sqlite:///elsewhere.db"},
                       {"PREFECT_SERVER_DATABASE_NAME": "other"}, {"PREFECT_HOME": ""}):
        assert db.seed_from_template(fresh | configured, cache) is False, configured
    assert not (home / "prefect.db").exists()

    home.mkdir()
    (home / "profiles.toml").write_text("[profiles.site]\n")  # may name a database
    assert db.seed_from_template(fresh, cache) is False
    (home / "profiles.toml").unlink()

    assert db.seed_from_template(fresh, cache) is True
    copied = home / "prefect.db"
    assert copied.read_bytes() == b"template bytes"
    assert copied.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in home.iterdir()] == ["prefect.db"]  # no partial file left

    copied.write_bytes(b"a server's own data")  # an existing database is never replaced
    assert db.seed_from_template(fresh, cache) is False
    assert copied.read_bytes() == b"a server's own data"


def test_the_template_is_named_for_the_prefect_that_made_it(tmp_path: Path) -> None:
    from importlib.metadata import version

    assert db.template_path(tmp_path).name == \
        f"prefect-{version('prefect')}.v{db.TEMPLATE_FORMAT}.db"
    # A format-1 template (migrated only) is never taken for one with block types.
    assert db.template_path(tmp_path).name != f"prefect-{version('prefect')}.db"
    made = _fake_template(tmp_path)
    assert db.build_template(tmp_path) == made  # kept, not remade
    assert made.read_bytes() == b"template bytes"


def _revision(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT version_num FROM alembic_version")]


@pytest.mark.slow
def test_a_real_server_finds_the_template_fully_migrated_and_serves_from_it(
        tmp_path: Path) -> None:
    template = db.build_template(tmp_path / "cache")
    made = _revision(template)
    assert len(made) == 1 and template.stat().st_mode & 0o777 == 0o600

    with sqlite3.connect(template) as conn:
        registered = {row[0] for row in conn.execute("SELECT slug FROM block_type")}
    assert {"local-file-system", "secret", "webhook"} <= registered

    port = free_port()
    env = {k: v for k, v in server_env(port).items() if not k.startswith(db.DATABASE_SETTINGS)}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    assert db.seed_from_template(env, tmp_path / "cache") is True
    env |= db.SEEDED_SERVER_SETTINGS  # as flows.server starts it on a fresh copy
    log = tmp_path / "server.log"
    with log.open("wb") as out:  # read back if it does not answer (once seen in CI, not here)
        server = subprocess.Popen(
            server_command(port), env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"
    try:
        assert _wait_healthy(api, server.pid, server), (
            f"the server did not answer (exit code {server.poll()}); its output ends:\n"
            + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        created = httpx.post(f"{api}/flows/", json={"name": "template-check"}, timeout=10)
        assert created.status_code in (200, 201), created.text
        assert _revision(Path(env["PREFECT_HOME"]) / "prefect.db") == made
        # The block types the server was told not to register are served from the copy.
        served = httpx.post(f"{api}/block_types/filter", json={}, timeout=10)
        assert served.status_code == 200, served.text
        assert {b["slug"] for b in served.json()} == registered
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
