"""Routes of the reviewer dashboard.

Server-rendered pages (Jinja2, autoescaped) and plain HTML forms: nothing runs in the
browser that could be tricked. Every form carries the session's CSRF token (a refused token
is audited); cookies are HttpOnly and SameSite=Strict, and Secure over TLS. Sign-in is
throttled per user name and per client (:mod:`ehr_release.storage.throttle`). Failures are
HTML pages (:mod:`ehr_release.dashboard.errors`). A decision goes through exactly the same
path as ``ehr-release approve`` (:func:`ehr_release.service.decide`): recorded by
:func:`ehr_release.storage.runs.decide` (which refuses self-approval, blank reasons and second
decisions, with an audit event); an approval then starts the publishing flow in this process.
No flow waits for the decision.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Form, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from ehr_release.dashboard import errors
from ehr_release.dashboard.pages import render
from ehr_release.dashboard.security import (
    COOKIE,
    Who,
    cookie_is_secure,
    csrf_guard,
    secure_cookies_from_env,
)
from ehr_release.errors import ApprovalError, EhrReleaseError, NotFound
from ehr_release.files import check_safe_name
from ehr_release.governance import same_person
from ehr_release.storage import runs, users
from ehr_release.storage.audit import iter_events, record_event
from ehr_release.storage.runs import Status
from ehr_release.storage.throttle import ThrottlePolicy
from ehr_release.storage.users import SignedIn

__all__ = ["COOKIE", "create_app"]
Publisher = Callable[[str], Status]
Csrf = Depends(csrf_guard)


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
        recent = runs.list_runs(limit=100)
        pending = [r for r in recent if r.status == Status.AWAITING_APPROVAL]
        return page(request, "index.html.j2", who, pending=pending, recent=recent)

    def _run_or_404(run_id: str):  # type: ignore[no-untyped-def]
        try:
            return runs.get_run(run_id)
        except NotFound:
            raise HTTPException(status_code=404, detail="no such run") from None

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def run_page(request: Request, run_id: str, who: Who, notice: str = "") -> HTMLResponse:
        run = _run_or_404(run_id)
        events = [{"seq": e.seq, "at": e.created_at, "actor": e.actor, "action": e.action,
                   "payload": e.payload_json} for e in iter_events(run_id)]
        can_decide = (who.role == "reviewer" and run.status == Status.AWAITING_APPROVAL
                      and not same_person(run.requester, who.name))
        return page(request, "run.html.j2", who, run=run,
                    parameters=json.loads(run.parameters_json),
                    verification=runs.latest_verification(run_id),
                    utility=runs.latest_utility(run_id), approval=runs.get_approval(run_id),
                    events=events, can_decide=can_decide, certificate=_certificate(run_id),
                    notice=notice)

    @app.get("/runs/{run_id}/certificate.pdf")
    def certificate(run_id: str, who: Who) -> FileResponse:
        _run_or_404(run_id)
        path = _certificate(run_id)
        if path is None:
            raise HTTPException(status_code=404, detail="no certificate yet")
        record_event(actor=who.name, action="certificate.downloaded", run_id=run_id,
                     payload={"file": path.name})
        return FileResponse(path, media_type="application/pdf",
                            filename=f"{check_safe_name(run_id)}-{path.name}")

    @app.post("/runs/{run_id}/decision", dependencies=[Csrf])
    def decide(request: Request, run_id: str, who: Who, decision: Annotated[str, Form()],
               reason: Annotated[str, Form()]) -> Response:
        _run_or_404(run_id)
        if who.role != "reviewer":
            record_event(actor=who.name, action="approval.refused", run_id=run_id,
                         payload={"why": f"role {who.role} may not decide releases"})
            raise HTTPException(status_code=403, detail=f"a {who.role} may not decide releases")
        from ehr_release import service

        try:
            status = service.decide(run_id, reviewer=who.name, decision=decision,
                                    reason=reason, publisher=publisher, channel="dashboard",
                                    role=who.role)
        except ApprovalError as exc:
            return RedirectResponse(f"/runs/{run_id}?notice=refused:+{exc}", status_code=303)
        except (EhrReleaseError, TimeoutError, RuntimeError) as exc:
            return RedirectResponse(f"/runs/{run_id}?notice=recorded,+but+{exc}",
                                    status_code=303)
        return RedirectResponse(f"/runs/{run_id}?notice=decision+recorded:+{status}",
                                status_code=303)

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


def _certificate(run_id: str) -> Path | None:
    """The filed final certificate if there is one, else the reviewer's draft."""
    best: Path | None = None
    for art in runs.list_artifacts(run_id):
        path = Path(art.path)
        if art.kind == "certificate" and path.exists():
            return path
        if art.kind == "certificate-draft" and path.exists():
            best = path
    return best
