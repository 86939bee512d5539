"""Where this installation keeps its local state, without importing SQLAlchemy.

Every command needs the home (Prefect's home lies inside it) and most need it before the
database: the CLI's refusal of bad input and its Prefect configuration must not pay for
SQLAlchemy's import (about 0.4 s of CPU), so the home — and the database URL, which
names a file in it by default — is found here and :mod:`ehr_release.storage.engine`
re-exports both (``status`` and ``list`` read that file with the standard library:
:mod:`ehr_release.storage.sqlite_read`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

HOME_ENV = "EHR_RELEASE_HOME"
DATABASE_URL_ENV = "EHR_RELEASE_DATABASE_URL"
#: The database's file in the home when no URL is configured.
DATABASE_FILE = "ehr_release.db"
#: The umask of every process the home starts (the local Prefect server, a release's flow
#: process and what it spawns): what they create in the home is 0600/0700.
PRIVATE_UMASK = 0o077


#: The application's folder name inside the platform's per-user data directory.
APP_NAME = "ehr-release"


def default_home() -> Path:
    """The per-user data directory (``~/.local/share/ehr-release`` on Linux).

    One place per user, not per current folder: every command, example and the dashboard
    then see the same runs, database and Prefect server, wherever they are started.
    """
    from platformdirs import user_data_path

    return user_data_path(APP_NAME, appauthor=False)


def home() -> Path:
    """The working folder for local state; created on first use, private to its owner.

    ``EHR_RELEASE_HOME`` if set, else :func:`default_home`. It holds the database, request
    files naming inputs, draft certificates with figures measured on patient data and the
    pseudonym key: mode 0700, tightened if it was looser.
    """
    path = home_path()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_mode & 0o077 and path.owner() == _user():
        path.chmod(0o700)
    return path


def database_url() -> str:
    """``EHR_RELEASE_DATABASE_URL``, else the SQLite file in the home."""
    return os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{home() / DATABASE_FILE}"


def home_path() -> Path:
    """Where the home is, without creating it (see :func:`home`)."""
    raw = os.environ.get(HOME_ENV)
    return (Path(raw).expanduser() if raw else default_home()).resolve()


def private_dir(path: Path) -> Path:
    """Create ``path`` and each missing parent with mode 0700; return it.

    ``Path.mkdir(parents=True, mode=0o700)`` gives only the last folder that mode: the
    parents get the default (0755 under the usual umask), which left ``<home>/runs`` open.
    """
    missing = []
    folder = path
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for new in reversed(missing):
        new.mkdir(mode=0o700, exist_ok=True)
    return path


def make_private(root: Path) -> None:
    """Take group and other permissions off ``root`` and everything under it.

    Why: the home holds the database, keys, draft certificates with figures measured on
    patient data — and Prefect's database, pickled task results and server log, which
    Prefect creates with the umask of whichever process writes them (0644/0755 under the
    usual 022). Processes the home starts run with :data:`PRIVATE_UMASK`; this catches what
    Prefect writes from the deciding process itself (the publishing flow runs there) and
    anything older. Only entries this user owns are changed; symbolic links are not
    followed; an entry that vanishes meanwhile is skipped.
    """
    if not root.exists():
        return
    uid = os.getuid()
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            _private(Path(folder) / name, uid)
    _private(root, uid)


def _private(path: Path, uid: int) -> None:
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode) or st.st_uid != uid or not st.st_mode & 0o077:
            return
        path.chmod(stat.S_IMODE(st.st_mode) & 0o700)
    except (FileNotFoundError, PermissionError):
        return


def _user() -> str:
    import getpass

    return getpass.getuser()
