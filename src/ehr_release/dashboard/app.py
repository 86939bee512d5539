"""The reviewer dashboard: the app, its security headers and its routers.

Server-rendered pages (Jinja2, autoescaped) and plain HTML forms: nothing runs in the
browser that could be tricked. Every form carries the session's CSRF token (a refused token
is audited). Failures are HTML pages (:mod:`ehr_release.dashboard.errors`). The routes live
in :mod:`ehr_release.dashboard.routes`, one router per job: sign-in
(:mod:`~ehr_release.dashboard.routes.signin`), runs and decisions
(:mod:`~ehr_release.dashboard.routes.runs`), documents
(:mod:`~ehr_release.dashboard.routes.documents`), a release's first rows
(:mod:`~ehr_release.dashboard.routes.rows`), the audit page
(:mod:`~ehr_release.dashboard.routes.audit`), the release history
(:mod:`~ehr_release.dashboard.routes.history`) and the comparisons
(:mod:`~ehr_release.dashboard.routes.comparisons`).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response

from ehr_release.dashboard import errors
from ehr_release.dashboard.launch import Launcher, launch_in_background
from ehr_release.dashboard.routes import (
    audit,
    comparisons,
    documents,
    history,
    rows,
    runs,
    signin,
)
from ehr_release.dashboard.security import (
    COOKIE,
    Network,
    secure_cookies_from_env,
    trusted_proxies_from_env,
)
from ehr_release.dashboard.settings import DashboardSettings, Publisher
from ehr_release.storage.throttle import ThrottlePolicy

__all__ = ["COOKIE", "create_app"]


def create_app(*, publish: Publisher | None = None, secure_cookies: bool | None = None,
               throttle: ThrottlePolicy | None = None,
               trusted_proxies: tuple[Network, ...] | None = None,
               launch: Launcher | None = None) -> FastAPI:
    """Build the app. ``publish`` runs the publishing flow of an approved run (default:
    :func:`ehr_release.service.publish`; tests inject one); ``launch`` starts the release
    flow of a row released from the comparisons page (default:
    :func:`~ehr_release.dashboard.launch.launch_in_background`).

    ``secure_cookies`` (default: ``EHR_RELEASE_SECURE_COOKIES``) marks cookies Secure even
    when TLS ends at a proxy; ``throttle`` (default: ``EHR_RELEASE_SIGNIN_*``) limits
    failed sign-ins; ``trusted_proxies`` (default: ``EHR_RELEASE_TRUSTED_PROXIES``) are
    the proxies whose ``X-Forwarded-For`` names the client. All are read here, so a bad
    setting fails at start-up.
    """
    from ehr_release.service import publish as publish_here

    app = FastAPI(title="ehr_release reviewer dashboard", docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.settings = DashboardSettings(
        publish=publish or publish_here,
        secure_cookies=secure_cookies_from_env() if secure_cookies is None else secure_cookies,
        throttle=throttle or ThrottlePolicy.from_env(),
        trusted_proxies=(trusted_proxies_from_env() if trusted_proxies is None
                         else trusted_proxies),
        launch=launch or launch_in_background)
    errors.install(app)

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        response: Response = await call_next(request)
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "form-action 'self'; frame-ancestors 'none'")
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    for module in (signin, runs, rows, documents, audit, history, comparisons):
        app.include_router(module.router)
    return app
