"""Whether this site is a test site: fixed when the site is made, read from the audit chain.

Why the chain and not the environment: a seed makes a release's randomness replayable
(shuffles, picks, DP noise), so a seeded release must never leave a real site. An
environment variable (``EHR_RELEASE_TEST_MODE``) is what any steward can set; a column is
what anyone who can write the database can flip. The chain's first event is neither: a test
site is one whose audit chain *opens* with a ``site.created`` event whose payload says
``{"test_site": true}`` and whose authenticator verifies under this site's audit key. It can
only be written on an empty chain, so an existing site — with runs, users, releases — can
never be turned into a test site, and editing the payload breaks the event's HMAC (then the
site reads as a normal one: seeds are refused, which is the safe side).

A normal site needs no event: it is created implicitly on first use as before, and every
chain that does not open with a test ``site.created`` event is a normal site.
``ehr-release site init`` (without ``--test``) records the fact explicitly.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from ehr_release.core.errors import EhrReleaseError, ParameterError
from ehr_release.parameters.params import SEED
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import GENESIS, append_event, lock_chain
from ehr_release.storage.chain_auth import audit_keyring, hash_version, matches
from ehr_release.storage.engine import engine_or_default
from ehr_release.storage.models import AuditEvent

SITE_CREATED = AuditAction.SITE_CREATED
#: The payload key of ``site.created`` that makes a test site.
TEST_SITE = "test_site"
ACTOR = "system:site"
#: What a refused seed says (one line): what to do instead, and why.
NOT_A_TEST_SITE = ("is only accepted on a test site, and this site's audit chain does not "
                   "open with a test site.created event (a seeded release's randomness can "
                   "be replayed, so it must never be published from a real site; make a "
                   "test site on an empty home with `ehr-release site init --test`)")


def create_site(*, test: bool, engine: Engine | None = None) -> AuditEvent:
    """Record ``site.created`` as the chain's first event; ``test`` makes a test site.

    Refused once the chain holds any event: the kind of a site is fixed when it is made.
    """
    with Session(engine_or_default(engine)) as s:
        lock_chain(s)  # nothing can be appended between the check and our event
        count = s.exec(select(func.count()).select_from(AuditEvent)).one()
        if count:
            kind = "a test site" if _first_says_test(s) else "a normal site"
            raise EhrReleaseError(
                f"this site already exists ({kind}; its audit chain holds {count} event"
                f"{'' if count == 1 else 's'}): a site's kind is fixed when it is made — "
                "make a test site on a new, empty home and database")
        ev = append_event(s, actor=ACTOR, action=SITE_CREATED, payload={TEST_SITE: test})
        s.commit()
        s.refresh(ev)
        return ev


def is_test_site(engine: Engine | None = None) -> bool:
    """True only if the chain opens with an authentic ``site.created`` saying test_site."""
    with Session(engine_or_default(engine)) as s:
        return _first_says_test(s)


def refuse_seed_unless_test_site(params: dict[str, Any],
                                 engine: Engine | None = None) -> None:
    """Refuse a request whose parameters carry a seed, unless this is a test site.

    Only a seeded request reads the chain: every other request pays nothing for this.
    """
    seed = params.get(SEED)
    if seed is not None and not is_test_site(engine):
        raise ParameterError(SEED, NOT_A_TEST_SITE, seed)


def _first_says_test(s: Session) -> bool:
    first = s.exec(select(AuditEvent).where(AuditEvent.seq == 1)).first()
    if first is None or first.action != SITE_CREATED or first.prev_hash != GENESIS:
        return False
    try:
        payload = json.loads(first.payload_json)
    except json.JSONDecodeError:
        return False
    if not isinstance(payload, dict) or payload.get(TEST_SITE) is not True:
        return False
    return _authentic(first)


def _authentic(ev: AuditEvent) -> bool:
    """The event's HMAC verifies under a key this site holds (a keyed, v2 event only)."""
    version, kid = hash_version(ev.hash)
    key = audit_keyring().get(kid) if version == 2 and kid else None
    return key is not None and matches(ev, key)
