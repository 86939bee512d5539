"""The run page's plain summary: what a release holds, for whom, and what was found.

Why: a reviewer decides from the dashboard, and tables of requirements and figures do not say
in words what is being released or whether it is any good. Every sentence is built from what
the flows recorded (pinned files, the publication bundle, verification and utility reports);
nothing is recomputed on patient data and nothing here quotes a patient value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ehr_release.core.errors import EhrReleaseError
from ehr_release.dashboard.format import number, size
from ehr_release.documents.plain import guarantee_sentence, verification_limits
from ehr_release.registry import get as get_algorithm
from ehr_release.storage import budget, runs
from ehr_release.storage.models import ReleaseRun
from ehr_release.storage.pending import PendingRelease

#: How each line looks: ``ok`` (green), ``warn`` (amber), ``fail`` (red) or plain ``info``.
LEVELS = ("ok", "warn", "fail", "info")
#: Data-use fields in the order a person asks about them; any others follow alphabetically.
_DATA_USE_ORDER = ("recipient", "purpose", "terms", "expires")


@dataclass(frozen=True)
class Line:
    """One labelled sentence of the summary."""

    label: str
    text: str
    level: str = "info"


def plain_summary(run: ReleaseRun, verification: dict[str, Any] | None,
                  utility: dict[str, Any] | None,
                  bundle: PendingRelease | None) -> list[Line]:
    """The summary, in the order a privacy officer asks: what, to whom, how safe, how useful."""
    outcome = json.loads(bundle.outcome_json) if bundle else {}
    data_use = json.loads(bundle.data_use_json) if bundle else {}
    lines = [_released(run.id, outcome.get("records")), _recipient(data_use),
             Line("Guarantee", _guarantee(run))]
    limits = verification_limits(run.algorithm)
    if limits:
        lines.append(_epsilon_account(run.id))
    lines.append(_verification(verification, limits))
    if outcome.get("attack"):
        lines.append(_attack(outcome["attack"], noise_audit=limits is not None))
    lines.extend(_utility(utility))
    lines.extend(Line("Waived", str(w), "warn") for w in outcome.get("waivers", []))
    return lines


def _released(run_id: str, records: int | None) -> Line:
    files = runs.pinned_candidate(run_id)
    if not files:
        return Line("What is released", "no release files yet (the run has not produced them)")
    listed = ", ".join(f"{name} ({size(n)})" for name, (_, n) in sorted(files.items()))
    count = (f"{number(records)} patient record{'s' if records != 1 else ''}"
             if records is not None else "records not counted by this algorithm")
    level = "warn" if records == 0 else "info"
    return Line("What is released", f"{count} in {len(files)} file"
                f"{'s' if len(files) != 1 else ''}: {listed}", level)


def _recipient(data_use: dict[str, Any]) -> Line:
    if not data_use:
        return Line("For whom", "recorded when the run is certified")
    order = sorted(data_use, key=lambda k: (_DATA_USE_ORDER.index(k)
                                            if k in _DATA_USE_ORDER else len(_DATA_USE_ORDER), k))
    parts = [f"{key.replace('_', ' ')}: {data_use[key]}" for key in order
             if data_use[key] not in (None, "")]
    if not parts:
        return Line("For whom", "no recipient, purpose or terms were given with the request",
                    "warn")
    return Line("For whom", "; ".join(parts))


def _guarantee(run: ReleaseRun) -> str:
    """The certificate's own sentence, with this run's parameters (one wording, not two)."""
    try:
        entry = get_algorithm(run.algorithm)
    except EhrReleaseError:
        return f"{run.algorithm} (not a registered algorithm on this installation)"
    try:
        params = entry.parse(json.loads(run.parameters_json))
    except EhrReleaseError:  # e.g. a configuration file moved since the request
        params = {}
    return guarantee_sentence(entry.name, entry.privacy_model, params)


def _epsilon_account(run_id: str) -> Line:
    """ε already spent on the run's extract by other DP releases (they compose)."""
    spent = budget.account(run_id, budget.dp_algorithm_names())
    if spent is None:
        return Line("ε of this extract", "not a differentially private run")
    return Line("ε of this extract", spent.text(), "fail" if spent.exceeded else "info")


def _verification(report: dict[str, Any] | None, limits: str | None = None) -> Line:
    if not report:
        return Line("Verification", "not verified yet")
    reqs = report.get("requirements", [])
    failed = [str(r.get("name")) for r in reqs if not r.get("passed")]
    if report.get("holds") and not failed:
        return Line("Verification", f"all {len(reqs)} requirements hold, checked from the "
                    "released files by code independent of the anonymizer"
                    + (f". {limits}" if limits else ""), "ok")
    return Line("Verification", f"{len(failed)} of {len(reqs)} requirements FAIL "
                f"({', '.join(failed)}): this release can never be published", "fail")


def _attack(attack: dict[str, Any], noise_audit: bool = False) -> Line:
    if noise_audit:  # ε-DP: no candidate sets; an audit of the published values' noise
        verdict = "found nothing the mechanism does not allow" if attack.get("passed") \
            else "FOUND values the mechanism does not allow"
        return Line("Attack audit", f"an independent audit "
                    f"({attack.get('attacker_model', 'see the certificate')}) {verdict}: "
                    f"{attack.get('measured', '')} (it can catch a release that bypassed the "
                    "mechanism, not prove the guarantee)", "ok" if attack.get("passed")
                    else "fail")
    measured = attack.get("measured") or (
        f"smallest candidate set {number(attack['smallest_candidate_set'])}"
        if attack.get("smallest_candidate_set") is not None else "no candidate set found")
    verdict = "failed to single anyone out" if attack.get("passed") else "SUCCEEDED"
    return Line("Attack audit", f"an independent re-identification attack "
                f"({attack.get('attacker_model', 'see the certificate')}) {verdict}: "
                f"{measured}", "ok" if attack.get("passed") else "fail")


def _utility(utility: dict[str, Any] | None) -> list[Line]:
    if not utility:
        return [Line("Utility", "not evaluated yet")]
    poor = [Line("Utility", f"POOR — below a trivial baseline: {reason}", "fail")
            for reason in utility.get("below_baseline", [])]
    notes = [Line("Utility", str(note)) for note in utility.get("notes", [])]
    if not poor:
        poor = [Line("Utility", "no trivial-baseline check flagged this release; the figures "
                     "and charts below say how close it stays to the original", "ok")]
    return poor + notes
