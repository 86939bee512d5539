"""The comparison report: a frontier chart, a table of every candidate, the recommendation.

Rendered like the certificate (Jinja2 with autoescape, WeasyPrint that may load only data:
URIs) so the two documents a reviewer reads look and behave alike. The report holds only
aggregate figures — never a patient row — but it is an internal document: utilities are
measured against the original data.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ehr_release.compare import Outcome, Requirement
from ehr_release.rendering import data_uri, environment


@dataclass(frozen=True)
class ComparisonContext:
    comparison_id: str
    requester: str
    created_at: datetime
    dataset_source: str
    dataset_rows: int
    dataset_fingerprint: str
    axis: str | None
    outcomes: Sequence[Outcome]
    recommended: Outcome | None
    reasons: Sequence[str]
    requirements: Sequence[Requirement]
    max_loss: float | None


def frontier_chart(outcomes: Sequence[Outcome], axis: str | None) -> bytes | None:
    """Loss against the grid parameter, one line per algorithm; failed candidates as ×."""
    if axis is None:
        return None
    lines: dict[str, list[tuple[float, float, bool]]] = defaultdict(list)
    for o in outcomes:
        raw = o.candidate.params.get(axis)
        if raw is None or o.loss is None:
            continue
        try:
            lines[f"{o.candidate.algorithm} — {o.loss_metric}"].append(
                (float(raw), o.loss, o.verified))
        except ValueError:
            continue
    if not lines:
        return None
    from ehr_release.plotting import plt, png

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for label, points in sorted(lines.items()):
        points.sort()
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs, ys, marker="o", label=label)
        bad = [(x, y) for x, y, ok in points if not ok]
        if bad:
            ax.scatter(*zip(*bad, strict=True), marker="x", s=80, color="#b00020", zorder=3)
    ax.set_xlabel(f"{axis} (more privacy →)" if axis in {"k", "m"} else axis)
    ax.set_ylabel("utility loss (lower is better)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png(fig)


def _vars(ctx: ComparisonContext) -> dict[str, Any]:
    chart = frontier_chart(ctx.outcomes, ctx.axis)
    env = environment()
    return {"c": ctx, "chart": data_uri(chart) if chart else None,
            "css": env.loader.get_source(env, "certificate.css")[0]}


def render_comparison_html(ctx: ComparisonContext) -> str:
    return environment().get_template("comparison.html.j2").render(**_vars(ctx))


def render_comparison_pdf(ctx: ComparisonContext) -> bytes:
    from weasyprint import HTML
    from weasyprint.urls import URLFetcher

    fetcher = URLFetcher(allowed_protocols={"data"}, fail_on_errors=True)
    return HTML(string=render_comparison_html(ctx), url_fetcher=fetcher).write_pdf()
