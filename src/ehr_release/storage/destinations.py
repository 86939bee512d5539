"""Where a release may land: only under the site's releases root.

A steward names ``--out``; approval later writes patient data there. Left unchecked, an
``--out`` that leads through a symlink to ``/etc`` (or a share outside the trust boundary)
would be stored and written to by the publishing flow. So the destination is resolved
(symlinks followed) and must lie under the site's releases root — stored in the database,
initialised from ``EHR_RELEASE_RELEASES_ROOT`` or ``<home>/releases`` on first use — when
the run is requested, before a reviewer's approval is recorded, and right before publishing,
where it must also still resolve to the same place (a symlink swapped in between is refused).
The resolved destination is shown to the reviewer and printed on the certificate.
"""

from __future__ import annotations

import os
from pathlib import Path

from ehr_release.core.errors import EhrReleaseError

ROOT_ENV = "EHR_RELEASE_RELEASES_ROOT"


class DestinationError(EhrReleaseError):
    """A release destination outside the releases root, or one that moved."""


def releases_root() -> Path:
    """The site's releases root, resolved (created on first use).

    Stored in the database (:mod:`ehr_release.storage.site_settings`), so the steward's
    request, the dashboard's decision and the publishing flow check the same folder;
    ``EHR_RELEASE_RELEASES_ROOT`` only initialises it, and one that names another folder
    later is refused.
    """
    from ehr_release.storage.site_settings import setting

    root = Path(setting("releases_root").value)
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


def shown_releases_root() -> str:
    """The releases root for ``ehr-release home``: the site's, else (database unreadable,
    or this process's variable disagrees) what this process would initialise, and why."""
    from ehr_release.storage.site_settings import configured

    try:
        return str(releases_root())
    except EhrReleaseError as exc:
        return f"{configured('releases_root')} ({exc})"
    except Exception:  # noqa: BLE001 - a database that cannot be read: say what is known
        return configured("releases_root")


def resolve_destination(out_dir: str | Path | None) -> Path:
    """``out_dir`` resolved and checked to lie under the releases root (default: the root)."""
    root = releases_root()
    if out_dir is None:
        return root
    resolved = Path(out_dir).expanduser().resolve()
    if not resolved.is_relative_to(root):
        raise DestinationError(f"release destination {resolved} is outside the releases root "
                               f"{root} (the site's; `ehr-release policy releases-root` shows and "
                               "changes it)")
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


def destination_problem(recorded: str) -> str | None:
    """Why a release could not land at the recorded destination now, or None if it can.

    Checked before an approval is recorded (and shown on the dashboard beside "Publishes
    to"): an approval whose publishing is bound to fail on the destination would otherwise
    be recorded and the run end failed, losing the review. Creates nothing.
    """
    try:
        destination = check_still_there(recorded)
    except EhrReleaseError as exc:
        return str(exc)
    folder = destination / "releases"
    if folder.is_symlink() or (folder.exists() and folder.resolve() != folder):
        return (f"release destination {recorded}: its releases folder resolves to "
                f"{folder.resolve()}; refusing to write through a changed path")
    existing = next(p for p in (folder, destination, *destination.parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"release destination {recorded}: {existing} is not writable by this process"
    return None
