"""Every failure the dashboard shows a browser is an HTML page: status code and one line.

Why: FastAPI's defaults answer with raw JSON (422 bodies even echo the submitted values)
and an unexpected exception with a bare 500 whose traceback — SQL, bound parameters,
perhaps a database URL — lands in the server log. Here an unreachable or misconfigured
database becomes 503 "database unavailable", anything else 500, and the log names only the
route and the exception type. The dashboard has no JSON API routes, so nothing stays JSON.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from ehr_release.dashboard.pages import error_page

_LOG = logging.getLogger("ehr_release.dashboard")
# Connection refused or dropped, bad or unknown URL: the operator's problem, not a bug.
_DATABASE_UNAVAILABLE = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.ArgumentError)


def route_of(request: Request) -> str:
    """``METHOD /path/{template}``: names the route without the values in its path."""
    route = request.scope.get("route")
    return f"{request.method} {getattr(route, 'path', '(no route)')}"


def install(app: FastAPI) -> None:
    """Register the HTML error handlers and the catch-all on ``app``."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if 300 <= exc.status_code < 400:  # the sign-in redirect travels as an exception
            return Response(status_code=exc.status_code, headers=exc.headers)
        return error_page(request, exc.status_code, str(exc.detail), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def bad_form(request: Request, exc: RequestValidationError) -> Response:
        fields = sorted({str(e["loc"][-1]) for e in exc.errors() if e.get("loc")})
        return error_page(request, 400, "the form is missing a field or has a malformed one: "
                          + (", ".join(fields) or "(unnamed)"))

    @app.middleware("http")
    async def plain_errors(request: Request, call_next):
        try:
            return await call_next(request)
        except Exception as exc:  # noqa: BLE001 — the last line of defence, by design
            _LOG.error("dashboard: %s failed with %s", route_of(request), type(exc).__name__)
            if isinstance(exc, _DATABASE_UNAVAILABLE):
                return error_page(request, 503, "the database is unavailable; try again later "
                                  "or ask the operator to check the database settings")
            return error_page(request, 500, "internal error; the operator can find the route "
                              "and error type in the dashboard's log")
