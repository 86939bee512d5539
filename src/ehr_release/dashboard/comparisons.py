"""Comparisons on the dashboard: every written comparison report, its frontier chart, the
recommended row, and what a steward needs to request a release of one row.

Why: ARX users pick a transformation from a chart of candidates; here a comparison was a
PDF and a ``run --from-comparison`` command line. The reports are the files the comparison
flow wrote (``<destination>/comparisons/cmp-…/comparison.json``, under the releases root);
nothing is recomputed. They are internal documents (utilities measured on the original
data): the page withholds an ε-differentially private row's loss, as the flow's Prefect log
does, since ε does not cover a figure measured on the true data.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ehr_release.comparison.compare import Candidate, Outcome

ID = re.compile(r"^cmp-[0-9a-f]{32}$")
#: How deep under the releases root a destination's ``comparisons`` folder may lie.
_DEPTH = 4
WITHHELD = "in the report only (ε-DP: measured on the true data)"


@dataclass(frozen=True)
class Row:
    """One candidate as the page shows it."""

    index: int
    algorithm: str
    params: dict[str, str]
    verified: bool
    failed_to_run: bool
    loss_metric: str | None
    loss: float | None
    withheld: bool  # an ε-DP row: its loss is not shown here, and it is never released
    releasable: bool


@dataclass(frozen=True)
class ComparisonView:
    comparison_id: str
    folder: Path
    destination: Path
    requester: str
    dataset_rows: int | None
    dataset_fingerprint: str
    requirements: list[str]
    rows: list[Row]
    recommended: int | None
    reasons: list[str]
    axis: str | None
    chart: str | None  # data:image/png;base64 URI of the frontier chart
    written_at: float


def comparison_folders() -> list[Path]:
    """Every comparison report folder under the releases root, newest first."""
    from ehr_release.storage.destinations import releases_root

    root = releases_root()
    found: list[Path] = []
    for depth in range(_DEPTH):
        pattern = "/".join(["*"] * depth + ["comparisons", "cmp-*", "comparison.json"])
        found.extend(p.parent for p in root.glob(pattern)
                     if ID.match(p.parent.name) and not p.parent.is_symlink())
    return sorted(set(found), key=lambda p: p.stat().st_mtime, reverse=True)


def find(comparison_id: str) -> Path | None:
    if not ID.match(comparison_id):
        return None
    return next((f for f in comparison_folders() if f.name == comparison_id), None)


def load(folder: Path) -> ComparisonView:
    """The report in ``folder`` as the page shows it (raises OSError/ValueError if unreadable)."""
    report = json.loads((folder / "comparison.json").read_text(encoding="utf-8"))
    rows = [_row(r) for r in report.get("rows", [])]
    grid_axis = _axis(rows)
    written = (folder / "comparison.json").stat().st_mtime
    return ComparisonView(
        comparison_id=folder.name, folder=folder, destination=folder.parent.parent,
        requester=str(report.get("requester", "")), dataset_rows=report.get("dataset_rows"),
        dataset_fingerprint=str(report.get("dataset_fingerprint", "")),
        requirements=[str(r) for r in report.get("requirements", [])],
        rows=rows, recommended=report.get("recommended_row"),
        reasons=[str(r) for r in report.get("reasons", [])], axis=grid_axis,
        chart=_chart(str(folder), written, grid_axis), written_at=written)


def _row(raw: dict[str, Any]) -> Row:
    cand = raw.get("candidate", {})
    dp = bool(cand.get("differentially_private"))
    verified = bool(raw.get("verified"))
    return Row(index=int(cand.get("index", 0)), algorithm=str(cand.get("algorithm", "")),
               params={str(k): str(v) for k, v in (cand.get("params") or {}).items()},
               verified=verified, failed_to_run=bool(raw.get("error")),
               loss_metric=raw.get("loss_metric"),
               loss=None if dp else raw.get("loss"), withheld=dp and raw.get("loss") is not None,
               releasable=verified and not dp)


def _axis(rows: list[Row]) -> str | None:
    """The grid parameter: the first parameter whose value differs between rows."""
    names: list[str] = []
    for row in rows:
        names.extend(k for k in row.params if k not in names)
    return next((n for n in names if len({r.params.get(n) for r in rows}) > 1), None)


@lru_cache(maxsize=16)
def _chart(folder: str, written_at: float, axis: str | None) -> str | None:
    """The report's own frontier chart
    (:func:`ehr_release.comparison.comparison_report.frontier_chart`), drawn once per
    written report, from the rows whose losses the page shows."""
    from ehr_release.comparison.comparison_report import frontier_chart

    report = json.loads((Path(folder) / "comparison.json").read_text(encoding="utf-8"))
    outcomes = []
    for raw in report.get("rows", []):
        row = _row(raw)
        if row.withheld or row.loss is None:
            continue
        outcomes.append(Outcome(Candidate(row.index, row.algorithm, row.params), row.verified,
                                row.loss_metric, float(row.loss)))
    png = frontier_chart(outcomes, axis)
    return "data:image/png;base64," + base64.b64encode(png).decode() if png else None
