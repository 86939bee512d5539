"""A migrated Prefect database with its block types, made once per install, copied into a
fresh home.

Why: a cold run (the first in a home) starts the home's Prefect server, and a server on an
empty SQLite file first runs Prefect's ~150 migrations: 17–19 s to answer at load 3, of
which the migrations are about 8 s (``bench/cold_server.py``; issue 37 goal 2). The
migrations give the same empty schema every time, so ``ehr-release warm-up`` (run by
``make install``) runs them once into a template under the user's cache folder, and the
first server of a home starts on a copy of it.

The next largest part of that first start was the registration of Prefect's block types
(its ``LocalFileSystem``, ``Secret``, ``Webhook``… rows): 2–4 CPU s of the server's 10–12 at
load 3–4, against about 0.5 s for the migration check that finds nothing to do. The
template therefore also holds the block types, registered by the very function the server
calls on start, and a server started on a fresh copy is told to skip both steps
(:data:`SEEDED_SERVER_SETTINGS`): the copy is at head and registered by construction,
because the template's file name carries Prefect's version and this format's number, so an
upgrade of Prefect (or of this format) makes and uses a new template. Any later start of
that home's server (the file is no longer fresh) runs both steps as Prefect always does.

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
#: The template's format: 2 = migrated and block types registered (1 was migrated only, and
#: must not be taken for 2, whose copies skip the registration).
TEMPLATE_FORMAT = 2
#: What a server started on a fresh copy skips: the template did both already.
SEEDED_SERVER_SETTINGS = {"PREFECT_SERVER_DATABASE_MIGRATE_ON_START": "false",
                          "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false"}
#: Registers the block types as the server's start does (``prefect.server.api.server``'s
#: ``add_block_types``), into the database the environment names.
_REGISTER_BLOCKS = """
import asyncio
from prefect.server.database import provide_database_interface
from prefect.server.models.block_registration import run_block_auto_registration

async def register():
    session = await provide_database_interface().session()
    async with session:
        await run_block_auto_registration(session=session)

asyncio.run(register())
"""


def template_path(cache_dir: Path | None = None) -> Path:
    """Where this install's template lives: ``<user cache>/prefect-<version>.v<format>.db``."""
    from importlib.metadata import version  # 0.02 s: not on every command's start

    if cache_dir is None:
        from platformdirs import user_cache_path

        cache_dir = user_cache_path("ehr_release")
    return cache_dir / f"prefect-{version('prefect')}.v{TEMPLATE_FORMAT}.db"


def build_template(cache_dir: Path | None = None) -> Path:
    """Run Prefect's migrations and block registration into a new SQLite file and keep it
    as the template.

    Prefect's own command does the migrating (``prefect server database upgrade``) and
    Prefect's own function the registering, in a scratch ``PREFECT_HOME`` with every
    database setting removed, so the template is the database a default server would have
    made on its first start. Idempotent: an existing template is kept.
    """
    target = template_path(cache_dir)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".prefect-") as scratch:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(DATABASE_SETTINGS) and k != "PREFECT_API_URL"}
        env.update(PREFECT_HOME=scratch, PREFECT_SERVER_ANALYTICS_ENABLED="false")
        for step, command in (
                ("migrations", ["-m", "prefect", "server", "database", "upgrade", "-y"]),
                ("block registration", ["-c", _REGISTER_BLOCKS])):
            done = subprocess.run([sys.executable, *command], env=env, capture_output=True,
                                  text=True, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                raise RuntimeError(f"Prefect's {step} failed: {tail[0]}")
        made = Path(scratch) / DATABASE_FILE
        if not made.exists():
            raise RuntimeError("Prefect's migrations made no database file")
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
    now; True if copied, and the server started next should then get
    :data:`SEEDED_SERVER_SETTINGS`. Without a template nothing happens (the server
    migrates and registers, as it always did)."""
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
