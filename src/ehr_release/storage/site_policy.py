"""The site's history policy, read from the audit chain: sources, the ε total, weaker releases.

A decision depends on these, so they are not environment variables nor mutable columns: each
change is an audited admin action (an event in the keyed chain, with who and why), and the
value in force is the newest such event. Changing them leaves a trace a reviewer can read.

* **Sources.** Every run belongs to a source, a population the site holds. ``default`` always
  exists (a single-source site never names one); any other is registered first.
* **ε total.** The most ε any one patient may accumulate over every differentially private
  release whose extract held them (:mod:`ehr_release.storage.budget`). Default
  :data:`DEFAULT_EPSILON_TOTAL` = 3: the DiffGen paper's experiments use ε up to 1 per
  release, so a patient may be in three such releases; e³ ≈ 20 bounds how much any one
  person's presence can change the odds of whatever the recipients of all of them together
  conclude. A site with a documented reason may set another.
* **Weaker re-releases.** A release weaker on some patients than an earlier one (smaller k or
  m, a weaker model) voids what the earlier certificate promised; refused unless the site
  allows it, and then the site's reason is printed on both documents of the new release.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fractions import Fraction

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ehr_release.core.errors import ConfigError, EhrReleaseError
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.engine import engine_or_default as _engine
from ehr_release.storage.models import AuditEvent
from ehr_release.storage.patient_links import DEFAULT_SOURCE

DEFAULT_EPSILON_TOTAL = Fraction(3)
SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")


class UnknownSource(EhrReleaseError):
    """A request names a source the site never registered."""


@dataclass(frozen=True)
class WeakerPolicy:
    """Whether weaker re-releases are allowed, by whom and why (None: the default, refused)."""

    allowed: bool
    set_by: str | None = None
    reason: str | None = None
    set_at: str | None = None

    def words(self) -> str:
        if not self.allowed:
            return "weaker re-releases are refused (site default)"
        return (f"site policy allows weaker re-releases (set by {self.set_by} on "
                f"{(self.set_at or '')[:10]}: {self.reason})")


def _latest(s: Session, action: AuditAction) -> AuditEvent | None:
    return s.exec(select(AuditEvent).where(AuditEvent.action == action.value)
                  .order_by(col(AuditEvent.seq).desc()).limit(1)).first()


def epsilon_total(engine: Engine | None = None, s: Session | None = None) -> Fraction:
    """The ε total in force: the newest ``site.epsilon_total_set`` event, else the default."""
    if s is None:
        with Session(_engine(engine)) as own:
            return epsilon_total(s=own)
    event = _latest(s, AuditAction.SITE_EPSILON_TOTAL_SET)
    return DEFAULT_EPSILON_TOTAL if event is None \
        else Fraction(json.loads(event.payload_json)["total"])


def parse_total(raw: str) -> Fraction:
    """A positive finite ε total from text; a one-line ConfigError otherwise."""
    try:
        value = Fraction(str(raw).strip())
    except (ValueError, ZeroDivisionError):
        value = Fraction(-1)
    if value <= 0:
        raise ConfigError(f"the ε total must be a positive number (the most ε any patient may "
                          f"accumulate over every DP release), got {raw!r}")
    return value


def set_epsilon_total(total: Fraction | str, *, actor: str, reason: str,
                      engine: Engine | None = None) -> Fraction:
    """Change the site's ε total: an audited admin action (who, old and new value, why)."""
    value = parse_total(str(total))
    _require_reason(reason)
    old = epsilon_total(engine)
    record_event(actor=actor, action=AuditAction.SITE_EPSILON_TOTAL_SET,
                 payload={"total": str(value), "previous": str(old), "reason": reason.strip()},
                 engine=engine)
    return value


def weaker_policy(engine: Engine | None = None, s: Session | None = None) -> WeakerPolicy:
    """Whether the site allows weaker re-releases (newest ``site.weaker_policy_set``)."""
    if s is None:
        with Session(_engine(engine)) as own:
            return weaker_policy(s=own)
    event = _latest(s, AuditAction.SITE_WEAKER_POLICY_SET)
    if event is None:
        return WeakerPolicy(False)
    payload = json.loads(event.payload_json)
    return WeakerPolicy(bool(payload["allowed"]), event.actor, payload["reason"],
                        event.created_at)


def set_weaker_policy(allowed: bool, *, actor: str, reason: str,
                      engine: Engine | None = None) -> WeakerPolicy:
    """Allow or refuse weaker re-releases: an audited admin action with its reason."""
    _require_reason(reason)
    record_event(actor=actor, action=AuditAction.SITE_WEAKER_POLICY_SET,
                 payload={"allowed": bool(allowed), "reason": reason.strip()}, engine=engine)
    return weaker_policy(engine)


def register_source(name: str, *, actor: str, description: str = "",
                    engine: Engine | None = None) -> bool:
    """Register a source (a population the site holds); False if it already was."""
    check_source_name(name)
    if name in sources(engine):
        return False
    record_event(actor=actor, action=AuditAction.SOURCE_REGISTERED,
                 payload={"source": name, "description": description.strip()[:500]},
                 engine=engine)
    return True


def sources(engine: Engine | None = None) -> list[str]:
    """Registered sources, ``default`` first."""
    with Session(_engine(engine)) as s:
        rows = s.exec(select(AuditEvent.payload_json).where(
            AuditEvent.action == AuditAction.SOURCE_REGISTERED.value)
            .order_by(col(AuditEvent.seq))).all()
    named = [json.loads(r)["source"] for r in rows]
    return list(dict.fromkeys([DEFAULT_SOURCE, *named]))


def check_source_name(name: str) -> str:
    if not SOURCE_NAME.match(name or ""):
        raise ConfigError(f"source name {name!r} must be 1–120 letters, digits, '.', '_' or "
                          "'-', starting with a letter or digit")
    return name


def require_source(name: str, engine: Engine | None = None) -> str:
    """``name`` if the site registered it (``default`` always is); else one clear line."""
    check_source_name(name)
    if name not in sources(engine):
        raise UnknownSource(f"source {name!r} is not registered at this site; register it "
                            f"with `ehr-release source add {name} --by NAME` (or omit "
                            f"--source for the site's default source)")
    return name


def _require_reason(reason: str) -> None:
    if not reason or not reason.strip():
        raise ConfigError("a site policy change needs a reason (--reason): it is recorded "
                          "in the audit trail and printed where it applies")
