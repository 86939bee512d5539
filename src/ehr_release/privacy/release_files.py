"""Reading a release back from disk as the verifier sees it: file name → bytes."""

from __future__ import annotations

import json
from pathlib import Path

from ehr_release.core.errors import InputError

#: Files the publisher adds around the release data; they are not part of what is verified.
#: (``certificate.pdf`` is no longer published — it is filed internally — but folders
#: published before the datasheet existed still hold one.)
ENVELOPE = frozenset({"certificate.pdf", "datasheet.pdf", "manifest.json"})


def read_release_files(path: Path) -> dict[str, bytes]:
    """A single release file, or every data file of a published release folder.

    A folder is walked whole (:func:`~ehr_release.privacy.release_tree.walk_release`): the
    result also carries every entry that is not a top-level regular file — subfolders,
    hidden names, links, FIFOs — and the closed world refuses each of them. (The path given
    is the operator's own choice and may itself be a link.)
    """
    from ehr_release.privacy.release_tree import walk_release

    if not path.exists():
        raise InputError("release does not exist", file=str(path))
    if path.is_file():
        return {path.name: path.read_bytes()}
    if not path.is_dir():
        raise InputError("release is neither a file nor a folder", file=str(path))
    files = walk_release(path, ENVELOPE)
    if not files and not files.strays:
        raise InputError("release folder holds no release files", file=str(path))
    return files


def release_id_of(path: Path) -> str:
    """The run id recorded in a published release folder's manifest (names its pseudonyms)."""
    manifest = path / "manifest.json" if path.is_dir() else path.parent / "manifest.json"
    if not manifest.is_file():
        raise InputError("this release carries pseudonymized patient ids: pass --release-id, "
                         "or the published release folder (its manifest.json names the run)",
                         file=str(path))
    try:
        run_id = json.loads(manifest.read_text(encoding="utf-8")).get("run_id")
    except (ValueError, AttributeError):
        run_id = None
    if not isinstance(run_id, str) or not run_id:
        raise InputError("manifest has no run_id", file=str(manifest))
    return run_id


def check_release_names(algorithm: str, files: dict[str, bytes]) -> None:
    """Refuse a release whose file names could escape its folder or replace the envelope.

    Checked right after anonymization, so a faulty algorithm fails the run before anything
    is verified, shown to a reviewer or written under ``releases/``.
    """
    from ehr_release.core.errors import EhrReleaseError
    from ehr_release.core.files import check_safe_name

    if not files:
        raise EhrReleaseError(f"algorithm {algorithm!r} produced no release files")
    for name in files:
        try:
            check_safe_name(name)
        except ValueError:
            raise EhrReleaseError(f"algorithm {algorithm!r} produced an unsafe release file "
                                  f"name {name!r}") from None
        if name in ENVELOPE:
            raise EhrReleaseError(f"algorithm {algorithm!r} produced {name!r}, a name reserved "
                                  "for the publisher")
