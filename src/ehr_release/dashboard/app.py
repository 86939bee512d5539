"""Routes of the reviewer dashboard.

Server-rendered pages (Jinja2, autoescaped) and plain HTML forms: nothing runs in the
browser that could be tricked. Every form carries the session's CSRF token (a refused token
is audited); cookies are HttpOnly and SameSite=Strict, and Secure over TLS. Sign-in is
throttled per user name and per client (:mod:`ehr_release.storage.throttle`). Failures are
HTML pages (:mod:`ehr_release.dashboard.errors`). A decision goes through exactly the same
path as ``ehr-release approve`` (:func:`ehr_release.service.decide`): recorded by
:func:`ehr_release.storage.runs.decide` (which refuses self-approval, blank reasons and second
decisions, with an audit event); an approval then starts the publishing flow in this process.
No flow waits for the decision. A refused decision re-renders the run page with the reason
(403/400/409); a recorded one whose publishing failed does too (502: the decision stands, the
step behind it did not finish, and the page shows the run as stalled with the command that
continues it); otherwise the browser is redirected to the run page, which says the status the
run ended in, read from the database (never words carried in the URL).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Form, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from ehr_release.dashboard import errors
from ehr_release.dashboard.documents import certificate_file, datasheet_file
from ehr_release.dashboard.pages import render
from ehr_release.dashboard.runview import NEEDS_OTHER, decision_notice, index_rows, run_view
from ehr_release.dashboard.security import (
    COOKIE,
    Who,
    cookie_is_secure,
    csrf_guard,
    secure_cookies_from_env,
)
from ehr_release.errors import ApprovalError, EhrReleaseError, NotFound, stored_error
from ehr_release.files import check_safe_name
from ehr_release.governance import same_person
from ehr_release.storage import runs, users
from ehr_release.storage.audit import iter_events, record_event
from ehr_release.storage.models import ReleaseRun
from ehr_release.storage.runs import Status
from ehr_release.storage.throttle import ThrottlePolicy
from ehr_release.storage.users import SignedIn

__all__ = ["COOKIE", "create_app"]
Publisher = Callable[[str], Status]
Csrf = Depends(csrf_guard)
_LOG = logging.getLogger("ehr_release.dashboard")


def _default_publisher(run_id: str) -> Status:
    """Publish an approved run through the local Prefect server (or PREFECT_API_URL)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from ehr_release.flows.server import ensure_api
    from ehr_release.service import publish

    with temporary_settings(updates={PREFECT_API_URL: ensure_api()}):
        return publish(run_id)


def create_app(*, publish: Publisher | None = None, secure_cookies: bool | None = None,
               throttle: ThrottlePolicy | None = None) -> FastAPI:
    """Build the app. ``publish`` runs the publishing flow of an approved run (tests inject
    one).

    ``secure_cookies`` (default: ``EHR_RELEASE_SECURE_COOKIES``) marks cookies Secure even
    when TLS ends at a proxy; ``throttle`` (default: ``EHR_RELEASE_SIGNIN_*``) limits
    failed sign-ins. Both are read here, so a bad setting fails at start-up.
    """
    app = FastAPI(title="ehr_release reviewer dashboard", docs_url=None, redoc_url=None,
                  openapi_url=None)
    publisher = publish or _default_publisher
    secure = secure_cookies_from_env() if secure_cookies is None else secure_cookies
    policy = throttle or ThrottlePolicy.from_env()
    errors.install(app)

    def page(request: Request, name: str, who: SignedIn | None, status_code: int = 200,
             **ctx: Any) -> HTMLResponse:
        return render(request, name, who, status_code, **ctx)

    @app.middleware("http")
    async def security_headers(request: Request, call_next):  # type: ignore[no-untyped-def]
        response: Response = await call_next(request)
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "form-action 'self'; frame-ancestors 'none'")
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request, error: str = "") -> HTMLResponse:
        return page(request, "login.html.j2", None, error=error)

    @app.post("/login")
    def login(request: Request, name: Annotated[str, Form()],
              credential: Annotated[str, Form()]) -> Response:
        client = request.client.host if request.client else "unknown"
        try:
            token, _ = users.sign_in(name, credential, client=client, policy=policy)
        except users.Throttled as exc:
            return page(request, "login.html.j2", None, 429, error=str(exc))
        except users.AuthError as exc:
            return page(request, "login.html.j2", None, error=str(exc))
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict",
                            secure=cookie_is_secure(request, secure),
                            max_age=users.SESSION_HOURS * 3600)
        return response

    @app.post("/logout", dependencies=[Csrf])
    def logout(request: Request) -> Response:
        users.sign_out(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, httponly=True, samesite="strict",
                               secure=cookie_is_secure(request, secure))
        return response

    @app.get("/", response_class=HTMLResponse)
    def home(request: Request, who: Who) -> HTMLResponse:
        from ehr_release.service import expire_overdue

        expire_overdue()
        pending, recent = index_rows(who)
        return page(request, "index.html.j2", who, pending=pending, recent=recent,
                    needs_other=NEEDS_OTHER)

    def run_page_response(request: Request, who: SignedIn, run_id: str, *,
                          status_code: int = 200, notice: str | None = None,
                          error: str | None = None) -> HTMLResponse:
        from ehr_release.service import expire_overdue

        _run_or_404(run_id)
        expire_overdue(run_id)  # a closed window shows as rejected, not as a live form
        view = run_view(runs.get_run(run_id), who)
        return page(request, "run.html.j2", who, status_code, notice=notice, error=error,
                    needs_other=NEEDS_OTHER, **view)

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def run_page(request: Request, run_id: str, who: Who, decided: bool = False) -> HTMLResponse:
        return run_page_response(request, who, run_id,
                                 notice=decision_notice(run_id) if decided else None)

    @app.get("/runs/{run_id}/certificate.pdf")
    def certificate(run_id: str, who: Who) -> FileResponse:
        return _download(run_id, who, certificate_file, "certificate")

    @app.get("/runs/{run_id}/datasheet.pdf")
    def datasheet(run_id: str, who: Who) -> FileResponse:
        return _download(run_id, who, datasheet_file, "datasheet")

    @app.post("/runs/{run_id}/decision", dependencies=[Csrf])
    def decide(request: Request, run_id: str, who: Who, decision: Annotated[str, Form()],
               reason: Annotated[str, Form()]) -> Response:
        run = _run_or_404(run_id)
        if who.role != "reviewer":
            record_event(actor=who.name, action="approval.refused", run_id=run_id,
                         payload={"why": f"role {who.role} may not decide releases"})
            raise HTTPException(status_code=403, detail=f"a {who.role} may not decide releases")
        from ehr_release import service

        try:
            service.decide(run_id, reviewer=who.name, decision=decision, reason=reason,
                           publisher=publisher, channel="dashboard", role=who.role)
        except ApprovalError as exc:
            return run_page_response(request, who, run_id, error=f"Refused: {exc}",
                                     status_code=_refusal_status(run, who, decision, reason))
        except (EhrReleaseError, TimeoutError, RuntimeError) as exc:
            _LOG.error("dashboard: publishing %s after its decision failed with %s", run_id,
                       type(exc).__name__)
            return run_page_response(
                request, who, run_id, status_code=502,
                error=f"Decision recorded, but publishing did not finish "
                      f"({stored_error(exc)}).")
        return RedirectResponse(f"/runs/{run_id}?decided=1", status_code=303)

    @app.get("/audit", response_class=HTMLResponse)
    def audit(request: Request, who: Who) -> HTMLResponse:
        if who.role not in {"auditor", "reviewer"}:
            raise HTTPException(status_code=403, detail="only auditors and reviewers")
        events = list(iter_events(None))[-500:]
        from ehr_release.integrity import check_integrity

        problems, summary = check_integrity()
        return page(request, "audit.html.j2", who, events=events, problems=problems,
                    summary=summary)

    return app


def _run_or_404(run_id: str) -> ReleaseRun:
    try:
        return runs.get_run(run_id)
    except NotFound:
        raise HTTPException(status_code=404, detail="no such run") from None


def _download(run_id: str, who: SignedIn, locate: Callable[[str], Path | None],
              what: str) -> FileResponse:
    """Serve the run's current ``what`` PDF; each download is an audit event."""
    _run_or_404(run_id)
    path = locate(run_id)
    if path is None:
        raise HTTPException(status_code=404, detail=f"no {what} yet")
    record_event(actor=who.name, action=f"{what}.downloaded", run_id=run_id,
                 payload={"file": path.name})
    return FileResponse(path, media_type="application/pdf",
                        filename=f"{check_safe_name(run_id)}-{path.name}")


def _refusal_status(run: ReleaseRun, who: SignedIn, decision: str, reason: str) -> int:
    """403 for the four-eyes rule, 400 for a malformed decision, 409 for a run's state."""
    if same_person(run.requester, who.name):
        return 403
    if decision not in {"approve", "reject"} or not reason.strip():
        return 400
    return 409
