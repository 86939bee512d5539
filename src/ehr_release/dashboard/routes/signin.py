"""Sign-in and sign-out. Sign-in is throttled per user name and per client
(:mod:`ehr_release.storage.throttle`; the client is the socket's address unless trusted
proxies are configured: :func:`~ehr_release.dashboard.security.client_address`), and a
refusal says ``Retry-After``; cookies are HttpOnly and SameSite=Strict, and Secure over
TLS."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ehr_release.dashboard.pages import render
from ehr_release.dashboard.security import (
    COOKIE,
    client_address,
    cookie_is_secure,
    csrf_guard,
)
from ehr_release.dashboard.settings import settings_of
from ehr_release.storage import users

router = APIRouter()


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, error: str = "") -> HTMLResponse:
    return render(request, "login.html.j2", None, error=error)


@router.post("/login")
def login(request: Request, name: Annotated[str, Form()],
          credential: Annotated[str, Form()]) -> Response:
    settings = settings_of(request)
    client = client_address(request, settings.trusted_proxies)
    try:
        token, _ = users.sign_in(name, credential, client=client, policy=settings.throttle)
    except users.Throttled as exc:
        refused = render(request, "login.html.j2", None, 429, error=str(exc))
        refused.headers["Retry-After"] = str(exc.retry_after_s)
        return refused
    except users.AuthError as exc:
        return render(request, "login.html.j2", None, error=str(exc))
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict",
                        secure=cookie_is_secure(request, settings.secure_cookies,
                                                settings.trusted_proxies),
                        max_age=users.SESSION_HOURS * 3600)
    return response


@router.post("/logout", dependencies=[Depends(csrf_guard)])
def logout(request: Request) -> Response:
    users.sign_out(request.cookies.get(COOKIE))
    response = RedirectResponse("/login", status_code=303)
    settings = settings_of(request)
    response.delete_cookie(COOKIE, httponly=True, samesite="strict",
                           secure=cookie_is_secure(request, settings.secure_cookies,
                                                   settings.trusted_proxies))
    return response
