"""Who is signed in, CSRF checks and cookie flags for the dashboard.

A refused form token is an audit event naming the route and the user (never the token):
a forged cross-site form is an attack on a signed-in reviewer and should leave a trace.
Cookies are ``Secure`` when the operator says the dashboard is served over TLS
(``--secure-cookies`` / ``EHR_RELEASE_SECURE_COOKIES``) and whenever the request itself
arrived over https.
"""

from __future__ import annotations

import os
from typing import Annotated

from fastapi import Depends, Form, HTTPException, Request

from ehr_release.dashboard.errors import route_of
from ehr_release.errors import ConfigError
from ehr_release.params import BOOL_WORDS
from ehr_release.storage import users
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.users import SignedIn

COOKIE = "ehr_session"
SECURE_COOKIES_ENV = "EHR_RELEASE_SECURE_COOKIES"


def current_user(request: Request) -> SignedIn:
    """The signed-in user, or a redirect to the sign-in page."""
    who = users.session_user(request.cookies.get(COOKIE))
    if who is None:
        raise HTTPException(status_code=303, headers={"Location": "/login"})
    return who


# Module level: with postponed annotations FastAPI resolves dependencies through globals.
Who = Annotated[SignedIn, Depends(current_user)]


def csrf_guard(request: Request, who: Who, csrf: Annotated[str, Form()] = "") -> None:
    """Refuse (403) and audit a form whose token is missing or not the session's.

    A route-level dependency, so a missing token is refused and audited like a wrong one
    instead of failing form validation first.
    """
    if users.check_csrf(who, csrf):
        return
    run_id = request.path_params.get("run_id")
    record_event(actor=who.name, action=AuditAction.DASHBOARD_CSRF_REFUSED,
                 run_id=str(run_id)[:64] if run_id else None,
                 payload={"route": route_of(request), "why": "mismatch" if csrf else "missing"})
    raise HTTPException(status_code=403, detail="invalid form token; reload the page")


def secure_cookies_from_env() -> bool:
    raw = os.environ.get(SECURE_COOKIES_ENV, "0").strip().lower()
    if raw not in BOOL_WORDS:
        raise ConfigError(f"{SECURE_COOKIES_ENV} must be one of {', '.join(BOOL_WORDS)}")
    return BOOL_WORDS[raw]


def cookie_is_secure(request: Request, configured: bool) -> bool:
    return configured or request.url.scheme == "https"
