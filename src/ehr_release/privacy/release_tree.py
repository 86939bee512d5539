"""The whole release folder, as the closed world sees it: every entry of its tree.

A verifier that reads only the top-level files it knows accepts a folder that also holds
``extra/ids.csv``, ``.git/…`` or ``.cache``: the recipient copies the folder, not the
verifier's reading of it. So the folder is walked recursively — files, subfolders, hidden
names, symbolic links, FIFOs, sockets, devices, empty folders — and everything that is not a
top-level regular file is an entry the closed world refuses (:class:`Stray`). Links are never
followed (a link can point anywhere, a declared name too), and a file is opened with
``O_NOFOLLOW | O_NONBLOCK`` and checked to be regular again after opening, so neither a link
swapped in after the walk nor a FIFO (whose read would block) is read.

The strays ride along with the files (:class:`ReleaseFolder`), so the closed world
(:func:`ehr_release.privacy.closed_world.violations`) refuses them whichever code read the
folder; their paths are shown to whoever runs the check (they are the operator's own files)
but never put in a stored message, since a name may carry a value.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Stray:
    """One entry of a release folder that is not a top-level regular file.

    ``path`` is relative to the folder, ``/``-separated (shown to the operator, never
    stored); ``kind`` says what it is in words (stored: it names no value); ``top`` says
    whether it sits directly in the folder (its name may then be a declared one).
    """

    path: str
    kind: str
    top: bool


class ReleaseFolder(dict[str, bytes]):
    """The top-level regular files of a release folder (name → bytes), and its strays."""

    def __init__(self, files: dict[str, bytes], strays: tuple[Stray, ...]) -> None:
        super().__init__(files)
        self.strays = strays


def entry_kind(mode: int, *, top: bool, name: str, empty: bool = False) -> str:
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISDIR(mode):
        return "empty folder" if empty else "folder"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISBLK(mode) or stat.S_ISCHR(mode):
        return "device"
    if not stat.S_ISREG(mode):
        return "special file"
    if not top:
        return "file in a subfolder"
    return "hidden file" if name.startswith(".") else "file"


def _entries(folder: Path, prefix: str = "") -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of every entry under ``folder``, depth first, sorted; links
    are not followed, so a link to a folder is one entry, never walked into."""
    with os.scandir(folder) as it:
        found = sorted(it, key=lambda e: e.name)
    for entry in found:
        rel = f"{prefix}{entry.name}"
        info = entry.stat(follow_symlinks=False)
        yield rel, info
        if stat.S_ISDIR(info.st_mode):
            yield from _entries(Path(entry.path), rel + "/")


def read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not a link, FIFO or device); else None.

    Opened without following a link and without blocking, then checked again on the open
    descriptor: what is read is what was checked.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def tree_entries(folder: Path) -> list[Stray]:
    """Every entry of ``folder``'s tree with its kind, nothing read (a top-level regular
    file is kind ``file``): for a check that needs the names only (``audit verify``)."""
    listed = list(_entries(folder))
    parents = {rel.rsplit("/", 1)[0] for rel, _ in listed if "/" in rel}
    return [Stray(rel, entry_kind(info.st_mode, top="/" not in rel,
                                  name=rel.rsplit("/", 1)[-1],
                                  empty=stat.S_ISDIR(info.st_mode) and rel not in parents),
                  "/" not in rel) for rel, info in listed]


def walk_release(folder: Path, envelope: Collection[str] = ()) -> ReleaseFolder:
    """Every entry of ``folder``: its top-level regular, non-hidden files (``envelope``
    names skipped: the publisher's files, not the release) and everything else as strays."""
    files: dict[str, bytes] = {}
    strays: list[Stray] = []
    for entry in tree_entries(folder):
        if entry.kind == "file":
            if entry.path in envelope:
                continue
            data = read_regular(folder / entry.path)
            if data is not None:
                files[entry.path] = data
                continue
            mode = os.lstat(folder / entry.path).st_mode  # swapped since the walk
            entry = Stray(entry.path, entry_kind(mode, top=True, name=entry.path), True)
        strays.append(entry)
    return ReleaseFolder(files, tuple(strays))
