"""Where this installation keeps its local state, without importing SQLAlchemy.

Every command needs the home (Prefect's home lies inside it) and most need it before the
database: the CLI's refusal of bad input and its Prefect configuration must not pay for
SQLAlchemy's import (about 0.4 s of CPU), so the home is found here and
:mod:`ehr_release.storage.engine` re-exports it.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "EHR_RELEASE_HOME"


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
    raw = os.environ.get(HOME_ENV)
    path = (Path(raw).expanduser() if raw else default_home()).resolve()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_mode & 0o077 and path.owner() == _user():
        path.chmod(0o700)
    return path


def _user() -> str:
    import getpass

    return getpass.getuser()
