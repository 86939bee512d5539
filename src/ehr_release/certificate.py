"""The release certificate: one PDF a privacy officer can read, sign off and file.

It is the *internal* governance record: it shows figures computed on the true data (what the
verifier measured, the attack audit's smallest candidate set, utility against the original),
which are outside the privacy model. It never leaves with the data; the recipient gets the
datasheet (:mod:`ehr_release.datasheet`), which carries only data-independent facts and
facts readable from the released bytes themselves.

The certificate states only recorded facts — the dataset fingerprint, the parameters as
validated, the verifier's requirements with what it measured, the utility figures, the
SHA-256 of every released file, the reviewer's decision and the head of the audit chain at
the time of rendering. It is rendered twice: a *draft* for the reviewer before the decision
(watermarked, no approval block), and the final one published next to the data.

HTML comes from a Jinja2 template with autoescaping on (parameters and reasons are user
text), and WeasyPrint turns it into PDF; charts are embedded as ``data:`` URIs so the
renderer never fetches anything.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from ehr_release import __version__
from ehr_release.reports import Chart, ReleaseOutcome, UtilityReport, VerificationReport
from ehr_release.request import DataUse

#: Rows of a utility table shown in the certificate; the full table is in the database.
MAX_TABLE_ROWS = 25


@dataclass(frozen=True)
class ApprovalBlock:
    """The reviewer's recorded decision, as it appears on the final certificate."""

    reviewer: str
    decision: str
    reason: str
    decided_at: datetime
    channel: str = "cli"
    role: str | None = None


@dataclass(frozen=True)
class CertificateContext:
    """Everything a certificate shows; built by the certify stage from the database."""

    run_id: str
    created_at: datetime
    requester: str
    dataset_source: str
    dataset_fingerprint: str
    dataset_rows: int
    dataset_schema: dict[str, str]
    algorithm: str
    algorithm_summary: str
    privacy_model: str
    parameters: dict[str, Any]
    verification: VerificationReport
    utility: UtilityReport
    manifest: list[tuple[str, str, int]]
    approval: ApprovalBlock | None
    audit_head: str
    audit_events: int
    status: str
    outcome: ReleaseOutcome | None = None
    data_use: DataUse = DataUse()
    destination: str = ""
    software_version: str = __version__

    @property
    def is_draft(self) -> bool:
        return self.approval is None


def _format_number(value: Any) -> str:
    """Figures as a reviewer reads them: integers plain, reals with 4 significant digits."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:.4g}"
    return str(value)


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("ehr_release", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _format_number
    env.filters["data_uri"] = _data_uri
    return env


def metrics_chart(utility: UtilityReport) -> Chart | None:
    """A bar chart of the utility figures, for algorithms that draw no chart of their own.

    Every certificate shows at least one picture of utility; values of very different size
    share a log axis so none of them is flattened to nothing.
    """
    values = {k: v for k, v in utility.metrics.items() if v == v and v is not None}
    if not values:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(values)[::-1]
    figures = [values[n] for n in names]
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(names) + 1.0))
    ax.barh(names, figures, color="#4a78a8")
    positive = [abs(v) for v in figures if v]
    if positive and min(v >= 0 for v in figures) and max(positive) / min(positive) > 1e3:
        ax.set_xscale("log")
    ax.set_xlabel("value")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130)
    plt.close(fig)
    return Chart("utility-figures", f"Utility figures reported for {utility.algorithm}",
                 buf.getvalue())


def _template_vars(ctx: CertificateContext) -> dict[str, Any]:
    charts = list(ctx.utility.charts)
    if not charts and (fallback := metrics_chart(ctx.utility)) is not None:
        charts.append(fallback)
    tables = {name: (rows[:MAX_TABLE_ROWS], len(rows))
              for name, rows in ctx.utility.tables.items() if rows}
    return {"c": ctx, "tables": tables, "charts": charts, "max_rows": MAX_TABLE_ROWS,
            "css": environment().loader.get_source(environment(), "certificate.css")[0]}


def render_certificate_html(ctx: CertificateContext) -> str:
    """The certificate as a self-contained HTML page (also what the PDF is made from)."""
    return environment().get_template("certificate.html.j2").render(**_template_vars(ctx))


def render_certificate_pdf(ctx: CertificateContext) -> bytes:
    """Render the certificate to PDF bytes with WeasyPrint."""
    return html_to_pdf(render_certificate_html(ctx))


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
