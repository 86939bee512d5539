"""The audit chain's authenticators and the site's audit keys: computed, never stored here.

Split from :mod:`ehr_release.storage.audit` (which writes and verifies the chain through
SQLModel) because a reader that only needs to trust single events — ``status`` taking a
run's requester from its ``run.requested`` event — must not pay for SQLAlchemy's import:
it reads the rows with the standard library (:mod:`ehr_release.storage.sqlite_read`) and
judges them with the very functions the writer and the verifier use.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable
from typing import Protocol

from ehr_release.core.canonical import canonical_json
from ehr_release.storage.home import home
from ehr_release.storage.site_keys import key_id, load_key, parse_key

_DOMAIN = b"ehr_release.audit.v1\x00"
_DOMAIN_V2 = b"ehr_release.audit.v2\x00"
_V1 = re.compile(r"[0-9a-f]{64}")
_V2 = re.compile(r"v2:([0-9a-f]{8}):([0-9a-f]{52})")
_V2_HEX = 52  # 208 bits of the HMAC: "v2:" + key id + ":" + digest fits the 64-char column
AUDIT_KEY_ENV = "EHR_RELEASE_AUDIT_KEY"
AUDIT_KEY_FILE = "audit.key"
RETIRED_KEYS_ENV = "EHR_RELEASE_AUDIT_RETIRED_KEYS"
RETIRED_KEYS_DIR = "audit-keys"
KEY_PURPOSE = "audit"
#: The prefix of a keyed (v2) authenticator, as matched in SQL (``hash LIKE 'v2:%'``).
KEYED_LIKE = "v2:%"


class EventRow(Protocol):
    """What an authenticator covers of an ``audit_events`` row (ORM object or plain row)."""

    @property
    def seq(self) -> int: ...
    @property
    def created_at(self) -> str: ...
    @property
    def actor(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def payload_json(self) -> str: ...
    @property
    def prev_hash(self) -> str: ...
    @property
    def hash(self) -> str: ...


def event_hash(*, seq: int, created_at: str, actor: str, action: str, run_id: str | None,
               payload_json: str, prev_hash: str, key: bytes | None = None) -> str:
    """The authenticator of one event's content chained to its predecessor.

    With ``key``: ``v2:<key id>:<HMAC-SHA256 truncated to 208 bits>``, the key id bound into
    the MAC. Without: the legacy v1 form, plain SHA-256 (still needed to verify old events).
    """
    content = canonical_json({"seq": seq, "created_at": created_at, "actor": actor,
                              "action": action, "run_id": run_id,
                              "payload": json.loads(payload_json)}).encode()
    if key is None:
        return hashlib.sha256(_DOMAIN + content + prev_hash.encode()).hexdigest()
    kid = key_id(key, KEY_PURPOSE)
    mac = hmac.new(key, _DOMAIN_V2 + kid.encode() + b"\0" + content + prev_hash.encode(),
                   hashlib.sha256).hexdigest()
    return f"v2:{kid}:{mac[:_V2_HEX]}"


def hash_version(value: str) -> tuple[int, str | None]:
    """(1, None) for a legacy hash, (2, key id) for a keyed one, (0, None) for neither."""
    if _V1.fullmatch(value):
        return 1, None
    m = _V2.fullmatch(value)
    return (2, m.group(1)) if m else (0, None)


def matches(ev: EventRow, key: bytes | None) -> bool:
    """Whether ``ev``'s stored authenticator is the one its content gives under ``key``
    (None: the legacy unkeyed form); a payload that is not JSON matches nothing."""
    try:
        recomputed = event_hash(seq=ev.seq, created_at=ev.created_at, actor=ev.actor,
                                action=ev.action, run_id=ev.run_id,
                                payload_json=ev.payload_json, prev_hash=ev.prev_hash, key=key)
    except ValueError:
        return False
    return hmac.compare_digest(recomputed, ev.hash)


def audit_key(*, create: bool = True) -> bytes | None:
    """The current audit key: ``EHR_RELEASE_AUDIT_KEY``, else ``audit.key`` in the home."""
    return load_key(AUDIT_KEY_ENV, AUDIT_KEY_FILE, "audit key", create=create)


def audit_keyring() -> dict[str, bytes]:
    """Every audit key this site holds, by key id: the current one and the retired ones.

    Retired keys come from ``EHR_RELEASE_AUDIT_RETIRED_KEYS`` (hex keys separated by commas
    or spaces) and from ``audit-keys/*.key`` in the home. Reading never creates a key.
    """
    keys: list[bytes] = []
    current = audit_key(create=False)
    if current is not None:
        keys.append(current)
    for i, text_key in enumerate(os.environ.get(RETIRED_KEYS_ENV, "").replace(",", " ")
                                 .split()):
        keys.append(parse_key(text_key, f"{RETIRED_KEYS_ENV}[{i}]", "audit key"))
    folder = home() / RETIRED_KEYS_DIR
    if folder.is_dir():
        for path in sorted(folder.glob("*.key")):
            keys.append(parse_key(path.read_text(encoding="ascii"), str(path), "audit key"))
    return {key_id(k, KEY_PURPOSE): k for k in keys}


class EventAuthenticator:
    """Authenticates single events of one chain with the site's keyring.

    ``first_keyed`` is the ``seq`` of the chain's first keyed (v2) event, None if it has
    none: a legacy unkeyed event counts only before it — after it, one is a forgery (a
    downgrade written without the key).
    """

    def __init__(self, keys: dict[str, bytes], first_keyed: int | None) -> None:
        self.keys = keys
        self.first_keyed = first_keyed

    def authentic(self, ev: EventRow) -> bool:
        version, kid = hash_version(ev.hash)
        if version == 2:
            key = self.keys.get(kid or "")
            return key is not None and matches(ev, key)
        if version == 1 and (self.first_keyed is None or ev.seq < self.first_keyed):
            return matches(ev, None)
        return False


def first_authentic_actors(events: Iterable[EventRow], check: EventAuthenticator
                           ) -> dict[str, str]:
    """run id → the actor of its first authentic event among ``events`` (in chain order):
    who requested a run, when given its ``run.requested`` events."""
    found: dict[str, str] = {}
    for ev in events:
        if ev.run_id is not None and ev.run_id not in found and check.authentic(ev):
            found[ev.run_id] = ev.actor
    return found
