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

from ehr_release.comparison.compare import Outcome, Requirement
from ehr_release.documents.rendering import data_uri, environment


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


Points = list[tuple[float, float, bool]]


def frontier_panels(outcomes: Sequence[Outcome], axis: str | None
                    ) -> dict[str, dict[str, Points]]:
    """Loss measure → algorithm → (grid value, loss, verified) points.

    One panel per measure: figures on different scales (ARE W2 and ARE W3, an ARE and a
    CUL) never share an axis, where the larger would flatten the other.
    """
    panels: dict[str, dict[str, Points]] = defaultdict(lambda: defaultdict(list))
    if axis is None:
        return {}
    for o in outcomes:
        raw = o.candidate.params.get(axis)
        if raw is None or o.loss is None or o.loss_metric is None:
            continue
        try:
            x = float(raw)
        except ValueError:
            continue
        panels[o.loss_metric][o.candidate.algorithm].append((x, o.loss, o.verified))
    return {metric: dict(lines) for metric, lines in sorted(panels.items())}


def frontier_chart(outcomes: Sequence[Outcome], axis: str | None) -> bytes | None:
    """Loss against the grid parameter, one panel per loss measure and one line per
    algorithm in it; failed candidates as ×."""
    panels = frontier_panels(outcomes, axis)
    if not panels:
        return None
    from ehr_release.documents.measures import explain
    from ehr_release.utility.plotting import plt, png

    fig, axes = plt.subplots(len(panels), 1, figsize=(6.5, 2.6 * len(panels) + 0.4),
                             squeeze=False)
    for ax, (metric, lines) in zip(axes[:, 0], panels.items(), strict=True):
        for algorithm, points in sorted(lines.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                    label=algorithm)
            bad = [(x, y) for x, y, ok in points if not ok]
            if bad:
                ax.scatter(*zip(*bad, strict=True), marker="x", s=80, color="#b00020",
                           zorder=3)
        meaning = explain(next(iter(lines)), metric).split(":")[0]
        ax.set_title(f"{metric}" + (f" — {meaning}" if meaning else ""), fontsize=8)
        ax.set_ylabel(f"{metric} (lower is better)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel(f"{axis} (more privacy →)" if axis in {"k", "m"} else str(axis))
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
