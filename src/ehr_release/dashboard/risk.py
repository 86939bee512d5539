"""The risk view of a run: how large the attacker's candidate sets were, as a bar chart.

Why: ARX users read a re-identification risk distribution before they export; here the
independent attack audit already measured every candidate set on the published bytes. Its
stored copy (``pending_releases.outcome_json``, written when the run was parked and kept
after publication) holds the distribution as size bands with the number of knowledge sets
in each (:func:`ehr_release.model.reports.candidate_set_distribution`) — counts only, and none
for a failed audit (:meth:`~ehr_release.model.reports.AttackReport.stored`). The chart is plain
HTML (one bar per band), so it needs no plotting library and reads in any browser.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ehr_release.storage.pending import PendingRelease


@dataclass(frozen=True)
class Band:
    """One bar: candidate sets of ``low``–``high`` records held ``count`` knowledge sets."""

    low: int
    high: int
    count: int
    share: float  # of all knowledge sets charted, 0–1
    width: float  # bar length, % of the longest bar
    below_k: bool  # every size in the band is below the threshold

    @property
    def label(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low:,}–{self.high:,}"


@dataclass(frozen=True)
class RiskView:
    """The chart and the figures around it, or why there is none (``why_none``)."""

    bands: list[Band]
    threshold: int | None
    smallest: int | None
    sets: int  # knowledge sets the chart counts
    attacker_model: str
    why_none: str | None = None


def risk_view(bundle: PendingRelease | None) -> RiskView | None:
    """The run's risk view; None when the run has no attack audit stored yet."""
    if bundle is None:
        return None
    attack: dict[str, Any] | None = json.loads(bundle.outcome_json).get("attack")
    if not attack:
        return None
    threshold = attack.get("threshold")
    smallest = attack.get("smallest_candidate_set")
    model = str(attack.get("attacker_model", ""))
    rows = [r for r in attack.get("candidate_set_sizes") or [] if _band_row(r)]
    if not rows:
        why = ("the audit failed: its distribution is kept on the verifying terminal only"
               if not attack.get("passed") else
               "this attack audit records no candidate sets (e.g. an ε-DP noise audit)"
               if smallest is None else
               "this attack audit recorded only its smallest candidate set")
        return RiskView([], threshold, smallest, 0, model, why)
    total = sum(r[2] for r in rows)
    top = max(r[2] for r in rows) or 1
    bands = [Band(low, high, count, count / total if total else 0.0, 100.0 * count / top,
                  threshold is not None and high < threshold)
             for low, high, count in rows]
    return RiskView(bands, threshold, smallest, total, model)


def _band_row(row: object) -> bool:
    """A stored row is ``[low, high, count]`` of non-negative integers, low ≤ high."""
    return (isinstance(row, list) and len(row) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in row)
            and row[0] <= row[1])
