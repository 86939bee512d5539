"""Site settings a decision depends on, stored once in the database, not per process.

Found (issue 34): the releases root was read from each process's environment. The README's
"Using it" block exported ``EHR_RELEASE_RELEASES_ROOT`` and its dashboard block did not, so
a run requested with ``--out out/`` passed its request-time check, the dashboard showed
"Publishes to …/out/releases/…", and the approval — checked by the dashboard process against
``<home>/releases`` — ended the run as failed. A request and its publisher must check the
same rule, whichever process or machine each runs in.

So each setting here is the site's: the newest ``site.setting_set`` event in the keyed audit
chain (who, the old and new value, why), like the ε total (:mod:`site_policy`). The
environment variable only *initialises* it: on first use, with no event yet, its value (or
the default) is recorded by ``system:first-use``. Afterwards a process whose variable names
another value is refused in one line saying how to change the site's setting
(``ehr-release policy releases-root|data-use``), rather than silently using either.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session, col, select

from ehr_release.core.errors import ConfigError
from ehr_release.storage.actions import DEFAULT_APPROVAL_TIMEOUT_S, AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.engine import engine_or_default
from ehr_release.storage.home import home
from ehr_release.storage.models import AuditEvent

FIRST_USE = "system:first-use"
_TRUE = {"1", "true", "yes", "on", "require", "required"}
_FALSE = {"", "0", "false", "no", "off", "optional"}


class SettingConflict(ConfigError):
    """This process's environment names another value than the site's stored setting."""


@dataclass(frozen=True)
class Setting:
    """One site setting: its variable, default, how a value is normalised and shown."""

    name: str
    env: str | None  # None: no variable initialises it (the default does)
    command: str  # the `ehr-release policy` command that changes it
    default: Callable[[], str]
    normalise: Callable[[str], str]
    words: str


def _root(raw: str) -> str:
    if not raw.strip():
        raise ConfigError("the releases root must name a folder")
    return str(Path(raw.strip()).expanduser().resolve())


def _seconds(raw: str) -> str:
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"the approval window must be a whole number of seconds > 0, "
                          f"got {raw!r}")
    return str(value)


def _flag(raw: str) -> str:
    value = raw.strip().lower()
    if value in _TRUE:
        return "on"
    if value in _FALSE:
        return "off"
    raise ConfigError(f"expected on or off (1/0, yes/no), got {raw!r}")


SETTINGS = {s.name: s for s in (
    Setting("releases_root", "EHR_RELEASE_RELEASES_ROOT", "releases-root",
            lambda: str(home() / "releases"), _root,
            "the only folder releases may be published under"),
    Setting("require_data_use", "EHR_RELEASE_REQUIRE_DATA_USE", "data-use",
            lambda: "off", _flag,
            "every request must name recipient, purpose, terms and expiry"),
    Setting("approval_window", None, "approval-window",
            lambda: str(DEFAULT_APPROVAL_TIMEOUT_S), _seconds,
            "seconds a reviewer has to decide a request that names no --approval-timeout"),
)}


@dataclass(frozen=True)
class Stored:
    """A setting's value in force and where it came from."""

    value: str
    set_by: str
    set_at: str
    reason: str


def _stored(name: str) -> Stored | None:
    with Session(engine_or_default(None)) as s:
        events = s.exec(select(AuditEvent).where(
            AuditEvent.action == AuditAction.SITE_SETTING_SET.value)
            .order_by(col(AuditEvent.seq).desc())).all()
    for event in events:
        payload = json.loads(event.payload_json)
        if payload.get("setting") == name:
            return Stored(payload["value"], event.actor, event.created_at, payload["reason"])
    return None


def setting(name: str) -> Stored:
    """The site's value of ``name``; recorded from the environment (or the default) on first
    use; a process whose variable differs is refused (:class:`SettingConflict`)."""
    spec = SETTINGS[name]
    raw = os.environ.get(spec.env) if spec.env else None
    stored = _stored(name)
    if stored is None:
        value = spec.normalise(raw if raw is not None else spec.default())
        why = f"initialised from {spec.env}" if raw is not None else "initialised to the default"
        record_event(actor=FIRST_USE, action=AuditAction.SITE_SETTING_SET,
                     payload={"setting": name, "value": value, "previous": None,
                              "reason": why})
        return _stored(name) or Stored(value, FIRST_USE, "", why)
    if raw is not None and raw.strip() and spec.normalise(raw) != stored.value:
        raise SettingConflict(
            f"{spec.env}={raw} differs from this site's setting ({spec.words}: "
            f"{stored.value}, set by {stored.set_by} on {stored.set_at[:10]}); unset the "
            f"variable, or change the site's setting with `ehr-release policy {spec.command} "
            f"{spec.normalise(raw)} --by NAME --reason WHY`")
    return stored


def configured(name: str) -> str:
    """What this process's environment (or the default) says, without the database: for
    ``ehr-release home`` when the database cannot be read."""
    spec = SETTINGS[name]
    raw = os.environ.get(spec.env) if spec.env else None
    return spec.normalise(raw if raw is not None else spec.default())


def change(name: str, value: str, *, actor: str, reason: str) -> tuple[str, bool]:
    """Change a site setting: an audited admin action; ``(value, changed)``."""
    spec = SETTINGS[name]
    new = spec.normalise(value)
    if not actor.strip():
        raise ConfigError("a site setting change needs --by NAME (it is audited)")
    if not reason.strip():
        raise ConfigError("a site setting change needs a reason (--reason): it is recorded "
                          "in the audit trail")
    old = _stored(name)
    if old is not None and old.value == new:
        return new, False
    record_event(actor=actor.strip(), action=AuditAction.SITE_SETTING_SET,
                 payload={"setting": name, "value": new,
                          "previous": None if old is None else old.value,
                          "reason": reason.strip()})
    return new, True


def approval_window_s() -> int:
    """Seconds a reviewer has for a request that named no window of its own."""
    return int(setting("approval_window").value)
