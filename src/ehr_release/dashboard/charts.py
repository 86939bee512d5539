"""The certificate's utility charts, for the run page.

Why: the certificate carries charts, and a reviewer deciding in the dashboard should see the
same pictures without opening the PDF. A parked run's charts are in its publication bundle
(``pending_releases.utility_json``, PNGs as base64, see :mod:`ehr_release.release.bundle`); they are
embedded as ``data:`` URIs (the CSP allows ``img-src data:``), so no extra route has to check
who may fetch them. An algorithm that draws no chart gets the certificate's fallback bar
chart of its figures, drawn once per run and figures.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ehr_release.core.canonical import canonical_json
from ehr_release.storage.pending import PendingRelease

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class ChartView:
    """One chart as the page shows it."""

    name: str
    caption: str
    src: str  # a data:image/png;base64 URI


def run_charts(bundle: PendingRelease | None, utility: dict[str, Any] | None) -> list[ChartView]:
    """The charts of the run's certificate: the algorithm's own, else the figures chart.

    A chart whose bytes are not a PNG is left out rather than handed to the browser.
    """
    views = []
    if bundle is not None:
        for chart in json.loads(bundle.utility_json).get("charts", []):
            view = _view(str(chart.get("name", "")), str(chart.get("caption", "")),
                         str(chart.get("png", "")))
            if view is not None:
                views.append(view)
    if views or not utility or not utility.get("metrics"):
        return views
    fallback = _figures_chart(str(utility.get("algorithm", "")),
                              canonical_json(utility["metrics"]))
    return [fallback] if fallback is not None else []


def _view(name: str, caption: str, png_b64: str) -> ChartView | None:
    try:
        png = base64.b64decode(png_b64, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not png.startswith(_PNG_MAGIC):
        return None
    return ChartView(name, caption, "data:image/png;base64," + png_b64)


@lru_cache(maxsize=32)
def _figures_chart(algorithm: str, metrics_json: str) -> ChartView | None:
    """The certificate's fallback chart (matplotlib, so drawn once per distinct figures)."""
    from ehr_release.documents.certificate import metrics_chart
    from ehr_release.model.reports import UtilityReport

    chart = metrics_chart(UtilityReport(algorithm, json.loads(metrics_json)))
    if chart is None:
        return None
    return _view(chart.name, chart.caption, base64.b64encode(chart.png).decode("ascii"))
