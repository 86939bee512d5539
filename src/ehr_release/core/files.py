"""Small file helpers: hashing and durable writes (fsync), used by certify and publish."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def write_durably(path: Path, data: bytes, *, private: bool = False) -> None:
    """Write and fsync a file, so a crash after return cannot leave it truncated.

    ``private`` creates it with mode 0600 (work files in the home: requests, drafts).
    """
    if private:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        os.close(fd)
    with path.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def fsync_dir(path: Path) -> None:
    """Persist a directory entry (a new file or a rename) on POSIX file systems."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


SAFE_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_safe_name(name: str) -> str:
    """Refuse file names that could escape their folder (``..``, separators, hidden files)."""
    if (not name or name.startswith(".") or any(c not in SAFE_NAME_CHARS for c in name)):
        raise ValueError(f"unsafe file name {name!r}")
    return name
