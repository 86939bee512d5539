"""Which software made a release: the package version and the source commit.

A certificate that says only "0.1.0" cannot tell two builds of the same version apart, so the
commit is read too: from ``EHR_RELEASE_COMMIT`` when a build or container sets it, else by
asking git about the checkout this package was imported from. Anything else — no git, not a
checkout (an installed wheel), a slow or broken repository — gives ``"unknown"``: the
version line must never be why a certificate fails to render.
"""

from __future__ import annotations

import os
import subprocess
from functools import cache
from pathlib import Path

from ehr_release import __version__

COMMIT_ENV = "EHR_RELEASE_COMMIT"
UNKNOWN = "unknown"
_PACKAGE = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    """One git command in the package's folder; None on any failure (never raises)."""
    try:
        done = subprocess.run(["git", "-C", str(_PACKAGE), *args], capture_output=True,
                              text=True, timeout=5, check=False,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


@cache
def commit() -> str:
    """The source commit (12 hex digits, ``+local changes`` when the tree differs from it).

    Only a package that git tracks counts: a copy installed into a virtualenv that happens
    to sit inside some other repository must not report that repository's commit.
    """
    if given := os.environ.get(COMMIT_ENV, "").strip():
        return given[:64]
    if _git("ls-files", "--error-unmatch", "__init__.py") is None:
        return UNKNOWN
    head = _git("rev-parse", "--short=12", "HEAD")
    if head is None:
        return UNKNOWN
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return f"{head}+local changes" if dirty else head


def software_version() -> str:
    """What the documents print, e.g. ``ehr_release 0.1.0 (commit 9da05cf1a2b3)``."""
    return f"ehr_release {__version__} (commit {commit()})"
