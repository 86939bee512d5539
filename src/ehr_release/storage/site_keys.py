"""Site secrets kept outside the database: the pseudonym key and the audit key.

Both follow one rule, so it lives here once. A key is an environment variable holding at least
32 bytes of hexadecimal — what a deployment whose processes run on several machines must use —
otherwise a file in the working folder (``home()``), created with fresh OS randomness on first
use, mode 0600. Keeping the key out of the database is the point: whoever can write the
database cannot also recompute what the key protects.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from ehr_release.core.errors import ConfigError
from ehr_release.storage.home import home

MIN_KEY_BYTES = 32


def parse_key(text: str, where: str, what: str) -> bytes:
    """The bytes of a hex key read from ``where``; refuses short or non-hex keys by name."""
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise ConfigError(f"{where}: the {what} must be hexadecimal") from None
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(f"{where}: the {what} must be at least {MIN_KEY_BYTES} bytes "
                          f"({2 * MIN_KEY_BYTES} hex digits), got {len(key)}")
    return key


def write_new_key(path: Path, key: bytes | None = None) -> bool:
    """Create ``path`` holding ``key`` (default: fresh randomness), mode 0600, atomically.

    The key is written to a temporary file, fsynced, then hard-linked into place: a reader
    never sees half a key, and when two processes race the first one's key is kept. Returns
    False (and leaves the existing file alone) if ``path`` already existed.
    """
    secret = key if key is not None else secrets.token_bytes(MIN_KEY_BYTES)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret.hex() + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.link(tmp, path)  # fails if another process won the race: theirs is kept
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def key_file(folder: Path, name: str) -> Path:
    """``folder/name``, created with a fresh random key if it does not exist yet."""
    path = folder / name
    if not path.exists():
        write_new_key(path)
    return path


def load_key(env: str, file_name: str, what: str, *, create: bool = True) -> bytes | None:
    """The key from ``env`` if set, else from ``file_name`` in the home.

    With ``create`` the file is made on first use; without it a missing file gives None (a
    verifier must not mint a key as a side effect of reading).
    """
    if os.environ.get(env):
        return parse_key(os.environ[env], env, what)
    folder = home()
    path = key_file(folder, file_name) if create else folder / file_name
    if not path.exists():
        return None
    return parse_key(path.read_text(encoding="ascii"), str(path), what)


def key_id(key: bytes, purpose: str) -> str:
    """A short public name for a key (8 hex digits): which key, never the key itself."""
    return hashlib.sha256(f"ehr_release.{purpose}.key-id".encode() + b"\0" + key).hexdigest()[:8]
