"""A migrated, empty Prefect database made once per install, copied into a fresh home.

Why: a cold run (the first in a home) starts the home's Prefect server, and a server on an
empty SQLite file first runs Prefect's ~150 migrations: 17–19 s to answer at load 3, of
which the migrations are about 8 s (``bench/cold_server.py``; issue 37 goal 2). The
migrations give the same empty schema every time, so ``ehr-release warm-up`` (run by
``make install``) runs them once into a template under the user's cache folder, and the
first server of a home starts on a copy of it. The server still runs its own
``upgrade`` on start: a template left by an older Prefect is brought up to date there, so
a stale copy costs time, never correctness. The file name carries Prefect's version, so an
upgrade of Prefect makes (and uses) a new template.

The copy is made only where Prefect would create that very file itself: the default SQLite
database in ``PREFECT_HOME``, no database URL configured, no file there yet. The template
holds Prefect's empty tables only (no run, no patient value); the copy is private (0600)
like the rest of the home.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Settings that point Prefect's server at another database (Prefect 3 names, old alias).
DATABASE_SETTINGS = ("PREFECT_SERVER_DATABASE_", "PREFECT_API_DATABASE_")
#: The file Prefect creates in ``PREFECT_HOME`` by default.
DATABASE_FILE = "prefect.db"


def template_path(cache_dir: Path | None = None) -> Path:
    """Where this install's template lives: ``<user cache>/prefect-<version>.db``."""
    from importlib.metadata import version  # 0.02 s: not on every command's start

    if cache_dir is None:
        from platformdirs import user_cache_path

        cache_dir = user_cache_path("ehr_release")
    return cache_dir / f"prefect-{version('prefect')}.db"


def build_template(cache_dir: Path | None = None) -> Path:
    """Run Prefect's migrations into a new SQLite file and keep it as the template.

    Prefect's own command does the migrating (``prefect server database upgrade``), in a
    scratch ``PREFECT_HOME`` with every database setting removed, so the template is the
    schema a default server would have made. Idempotent: an existing template is kept.
    """
    target = template_path(cache_dir)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".prefect-") as scratch:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(DATABASE_SETTINGS) and k != "PREFECT_API_URL"}
        env.update(PREFECT_HOME=scratch, PREFECT_SERVER_ANALYTICS_ENABLED="false")
        done = subprocess.run(
            [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
            env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        made = Path(scratch) / DATABASE_FILE
        if done.returncode != 0 or not made.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"Prefect's migrations failed: {tail[0]}")
        made.chmod(0o600)
        os.replace(made, target)
    return target


def uses_default_database(environ: dict[str, str] | None = None) -> bool:
    """Whether a server started with ``environ`` would use ``PREFECT_HOME/prefect.db``:
    ``PREFECT_HOME`` set, no database setting and no profiles file that could hold one."""
    environ = dict(os.environ) if environ is None else environ
    prefect_home = environ.get("PREFECT_HOME")
    if not prefect_home or any(k.startswith(DATABASE_SETTINGS) for k in environ):
        return False
    profiles = environ.get("PREFECT_PROFILES_PATH") or str(Path(prefect_home) / "profiles.toml")
    return not Path(profiles).exists()


def seed_from_template(environ: dict[str, str] | None = None,
                       cache_dir: Path | None = None) -> bool:
    """Copy the template to ``PREFECT_HOME/prefect.db`` if Prefect would create that file
    now; True if copied. Without a template nothing happens (the server migrates)."""
    environ = dict(os.environ) if environ is None else environ
    if not uses_default_database(environ):
        return False
    target = Path(environ["PREFECT_HOME"]) / DATABASE_FILE
    template = template_path(cache_dir)
    if target.exists() or not template.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = target.with_name(f".{DATABASE_FILE}.{os.getpid()}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out, template.open("rb") as source:
        shutil.copyfileobj(source, out)
    os.replace(partial, target)  # whole or absent: a server never sees half a file
    return True
