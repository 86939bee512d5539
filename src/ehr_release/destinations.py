"""Where a release may land: only under the site's releases root.

A steward names ``--out``; approval later writes patient data there. Left unchecked, an
``--out`` that leads through a symlink to ``/etc`` (or a share outside the trust boundary)
would be stored and written to by the publishing flow. So the destination is resolved
(symlinks followed) and must lie under the releases root — ``EHR_RELEASE_RELEASES_ROOT``,
default ``<home>/releases`` — when the run is requested, and again right before publishing,
where it must also still resolve to the same place (a symlink swapped in between is refused).
The resolved destination is shown to the reviewer and printed on the certificate.
"""

from __future__ import annotations

import os
from pathlib import Path

from ehr_release.errors import EhrReleaseError

ROOT_ENV = "EHR_RELEASE_RELEASES_ROOT"


class DestinationError(EhrReleaseError):
    """A release destination outside the releases root, or one that moved."""


def releases_root() -> Path:
    """The configured releases root, resolved (created on first use)."""
    from ehr_release.storage.engine import home

    raw = os.environ.get(ROOT_ENV)
    root = Path(raw).expanduser() if raw else home() / "releases"
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


def resolve_destination(out_dir: str | Path | None) -> Path:
    """``out_dir`` resolved and checked to lie under the releases root (default: the root)."""
    root = releases_root()
    if out_dir is None:
        return root
    resolved = Path(out_dir).expanduser().resolve()
    if not resolved.is_relative_to(root):
        raise DestinationError(f"release destination {resolved} is outside the releases root "
                               f"{root} (set {ROOT_ENV} to change the root)")
    _require_folders(resolved, root)
    return resolved


#: The folders the flows create under a destination (see :func:`releases_folder`).
_SUBFOLDERS = ("releases", "comparisons")


def _require_folders(destination: Path, root: Path) -> None:
    """Refuse a destination that is, or lies under, something other than a folder, or whose
    ``releases``/``comparisons`` entry is not one: checked at the request, so that the
    pipeline and the reviewer's approval are not spent on a release that cannot land."""
    for path in (destination, *destination.parents):
        if path.exists() and not path.is_dir():
            raise DestinationError(f"release destination {destination}: {path} is not a folder")
        if path == root:
            break
    for name in _SUBFOLDERS:
        entry = destination / name
        if entry.exists() and not entry.is_dir():
            raise DestinationError(f"release destination {destination}: its {name} entry is "
                                   "not a folder")


def check_still_there(recorded: str) -> Path:
    """Before publishing: the recorded destination still resolves to itself, under the root."""
    now = resolve_destination(recorded)
    if now != Path(recorded):
        raise DestinationError(f"release destination {recorded} now resolves to {now}; "
                               "refusing to publish through a changed path")
    return now


def releases_folder(recorded: str, name: str = "releases") -> Path:
    """Before writing: the ``name`` folder under the recorded destination (``releases``, or
    ``comparisons`` for a comparison's report), created if missing, checked like the
    destination itself — ``check_still_there`` sees only the destination, and a symlink put
    in place of ``<destination>/releases`` would lead the release outside the root."""
    destination = check_still_there(recorded)
    folder = destination / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. a file put in the way after the request
        raise DestinationError(f"release destination {recorded}: its {name} folder cannot be "
                               f"created ({exc.strerror or type(exc).__name__})") from None
    if folder.is_symlink() or folder.resolve() != folder:
        raise DestinationError(f"release destination {recorded}: its {name} folder "
                               f"resolves to {folder.resolve()}; refusing to write through "
                               "a changed path")
    return folder
