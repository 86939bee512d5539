"""HTML → PDF for the documents a reviewer or recipient reads (certificate, datasheet,
comparison): one Jinja2 environment, one fetch-nothing renderer.

Kept apart from the documents themselves so each of them can use the others' pieces (the
certificate lists the released files the way the datasheet describes them) without an
import cycle.
"""

from __future__ import annotations

import base64
from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from ehr_release.documents.plain import format_number


def data_uri(png: bytes) -> str:
    """A PNG embedded in the page: the renderer never has to fetch anything."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


@cache
def environment() -> Environment:
    """Templates with autoescaping on: parameters, reasons and terms are user text."""
    env = Environment(
        loader=PackageLoader("ehr_release", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = format_number
    env.filters["data_uri"] = data_uri
    return env


def stylesheet() -> str:
    """The shared print stylesheet (A4, running header, page numbers, tables that fit)."""
    env = environment()
    return env.loader.get_source(env, "certificate.css")[0]


def html_to_pdf(html: str) -> bytes:
    """One self-contained HTML page to PDF bytes, never fetching anything.

    WeasyPrint is imported here, not at module level: it loads Pango, which costs a second
    and is only needed by the stages that actually render.
    """
    from weasyprint import HTML
    from weasyprint.urls import URLFetcher

    # Only embedded data: URIs may load: user text is escaped, but the renderer must not
    # reach the network or the file system even if a template change let a URL through.
    fetcher = URLFetcher(allowed_protocols={"data"}, fail_on_errors=True)
    return HTML(string=html, url_fetcher=fetcher).write_pdf()
