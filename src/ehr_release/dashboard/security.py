"""Who is signed in, CSRF checks and cookie flags for the dashboard.

A refused form token is an audit event naming the route and the user (never the token):
a forged cross-site form is an attack on a signed-in reviewer and should leave a trace.
Cookies are ``Secure`` when the operator says the dashboard is served over TLS
(``--secure-cookies`` / ``EHR_RELEASE_SECURE_COOKIES``) and whenever the request itself
arrived over https.

**Who the client is** (the sign-in throttle's per-client key): the socket's peer address.
``X-Forwarded-For`` is a header anyone can send — read blindly, every forged value is a new
client with a fresh allowance of guesses — so it is read only when the peer is one of the
proxies the site names in ``EHR_RELEASE_TRUSTED_PROXIES`` (addresses or networks), and then
the right-most address in it that is not itself a trusted proxy is the client: the one the
last trusted hop saw. uvicorn's own proxy-header handling (which trusts 127.0.0.1, i.e. any
local process) is switched off by ``ehr-release dashboard``, so this is the only reading.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Annotated

from fastapi import Depends, Form, HTTPException, Request

from ehr_release.core.errors import ConfigError
from ehr_release.dashboard.errors import route_of
from ehr_release.parameters.params import BOOL_WORDS
from ehr_release.storage import users
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.users import SignedIn

COOKIE = "ehr_session"
SECURE_COOKIES_ENV = "EHR_RELEASE_SECURE_COOKIES"
TRUSTED_PROXIES_ENV = "EHR_RELEASE_TRUSTED_PROXIES"
#: Longest client text kept as a throttle subject (a header may be anything).
_MAX_CLIENT = 64

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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


def cookie_is_secure(request: Request, configured: bool,
                     proxies: tuple[Network, ...] = ()) -> bool:
    """Secure when configured, when the request came over https, or when a trusted proxy
    says it did (``X-Forwarded-Proto``; uvicorn's own reading of it is off)."""
    if configured or request.url.scheme == "https":
        return True
    peer = request.client.host if request.client else ""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return forwarded == "https" and _trusted(peer, proxies)


def trusted_proxies_from_env() -> tuple[Network, ...]:
    """``EHR_RELEASE_TRUSTED_PROXIES``: addresses or networks (``10.0.0.5``, ``10.0.0.0/8``,
    ``::1``), separated by commas or spaces; empty or unset — no proxy is trusted."""
    raw = os.environ.get(TRUSTED_PROXIES_ENV, "")
    networks = []
    for item in raw.replace(",", " ").split():
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ConfigError(f"{TRUSTED_PROXIES_ENV} must list IP addresses or networks "
                              f"(e.g. 10.0.0.5, 10.0.0.0/8); {item[:60]!r} is neither") from None
    return tuple(networks)


def _trusted(address: str, proxies: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def client_address(request: Request, proxies: tuple[Network, ...]) -> str:
    """The client a sign-in is counted against (see the module docstring).

    The peer, unless it is a trusted proxy; then the right-most ``X-Forwarded-For`` entry
    that is not a trusted proxy (every header line counts, in order). A chain of trusted
    proxies only gives its left-most entry.
    """
    peer = request.client.host if request.client else "unknown"
    if not proxies or not _trusted(peer, proxies):
        return peer
    hops = [hop.strip() for line in request.headers.getlist("x-forwarded-for")
            for hop in line.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop[:_MAX_CLIENT]
    return hops[0][:_MAX_CLIENT] if hops else peer
