"""Rendering: one autoescaping Jinja2 environment for every dashboard page, error pages too."""

from __future__ import annotations

from http import HTTPStatus
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ehr_release.dashboard.format import FILTERS

# Autoescape every template: Starlette's default escapes only *.html, and ours end in .j2.
_ENV = Environment(
    loader=FileSystemLoader(Path(__file__).resolve().parents[1] / "templates" / "dashboard"),
    autoescape=True, undefined=StrictUndefined)
_ENV.filters.update(FILTERS)
TEMPLATES = Jinja2Templates(env=_ENV)


def render(request: Request, name: str, who: Any, status_code: int = 200,
           **ctx: Any) -> HTMLResponse:
    return TEMPLATES.TemplateResponse(request, name, {"who": who, **ctx},
                                      status_code=status_code)


def error_page(request: Request, status_code: int, line: str,
               headers: dict[str, str] | None = None) -> HTMLResponse:
    """A page with the status and one line of explanation — never a traceback or raw JSON.

    ``who`` is not looked up: the database may be the very thing that failed.
    """
    response = render(request, "error.html.j2", None, status_code, status=status_code,
                      title=HTTPStatus(status_code).phrase, line=line)
    response.headers.update(headers or {})
    return response
