"""``ehr-release status`` as a person reads it: one labelled line per fact, no Python dicts.

Found (issue 34): ``status`` printed ``parameters: {'config': …}`` and ``decision: {…}``, and
for ArtUC only what was typed — the k, δ and ε the run actually used come from its
configuration's ``defaults:`` and the registry's. The effective parameters are the request's
parsed the way the flow parses them (the configuration's defaults, then the registry's).
"""

from __future__ import annotations

from typing import Any

from ehr_release.core.errors import EhrReleaseError


def effective_parameters(algorithm: str, given: dict[str, Any]) -> dict[str, Any] | None:
    """The parameters the run used, or None when they cannot be re-derived (an algorithm
    no longer registered, a configuration file moved)."""
    from ehr_release.registry import get

    try:
        parsed = get(algorithm).parse(given)
    except (EhrReleaseError, OSError):
        return None
    return {k: v for k, v in parsed.items() if v is not None and k != "seed"}


def _pairs(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "(none)"


def status_lines(info: dict[str, Any]) -> list[str]:
    """The run summary (``service.run_summary`` plus ``effective_parameters``) as lines."""
    rows: list[tuple[str, str]] = [("run", info["run_id"]), ("status", info["status"])]
    if info.get("recorded_status"):
        rows.append(("recorded as", info["recorded_status"]))
    if info.get("next_step"):
        rows.append(("next step", info["next_step"]))
    rows.append(("algorithm", info["algorithm"]))
    effective = info.get("effective_parameters")
    rows.append(("parameters", _pairs(effective if effective is not None
                                      else info["parameters"])))
    if effective is not None and set(effective) != set(info["parameters"]):
        rows.append(("as requested", _pairs(info["parameters"])))
    rows += [("requester", info["requester"]),
             ("created", f"{info['created_at'][:19].replace('T', ' ')} UTC"),
             ("updated", f"{info['updated_at'][:19].replace('T', ' ')} UTC")]
    if info.get("verified") is not None:
        rows.append(("verified", "yes: the guarantee holds" if info["verified"]
                     else "no: the guarantee does not hold"))
    decision = info.get("decision")
    if decision:
        rows.append(("decision", f"{decision['decision']} by {decision['reviewer']} on "
                                 f"{decision['decided_at'][:16].replace('T', ' ')} UTC: "
                                 f"{decision['reason']}"))
    if info.get("error"):
        rows.append(("error", info["error"]))
    width = max(len(label) for label, _ in rows)
    return [f"{label:>{width}}: {value}" for label, value in rows]
