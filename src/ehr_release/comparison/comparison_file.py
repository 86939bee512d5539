"""Reading one row of a written comparison report — no Prefect, so the CLI stays quick.

``ehr-release run --from-comparison DIR --row N`` checks the row before any server starts.
"""

from __future__ import annotations

import json
import os

from ehr_release.core.errors import EhrReleaseError


def load_comparison_row(folder: str, row: int) -> tuple[str, dict[str, str], str]:
    """(algorithm, params, dataset fingerprint) of one row of a written comparison.

    ``row`` is the number the report shows (its candidate's ``index``: from 1 since issue
    34; reports written before count from 0 and are read by the numbers they show).
    """
    path = os.path.join(folder, "comparison.json")
    try:
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
        rows = report["rows"]
    except (OSError, ValueError, KeyError) as exc:
        raise EhrReleaseError(f"cannot read comparison {path}: {exc}") from None
    except RecursionError:  # a hostile file thousands of brackets deep (json recurses)
        raise EhrReleaseError(f"cannot read comparison {path}: nested too deeply") from None
    numbers = [r.get("candidate", {}).get("index") for r in rows]
    if row not in numbers:  # each row carries the number the report shows for it
        shown = f"{min(numbers)}–{max(numbers)}" if numbers and None not in numbers else "none"
        raise EhrReleaseError(f"comparison {path} has rows {shown}; got {row}")
    chosen = rows[numbers.index(row)]
    if not chosen.get("verified"):
        raise EhrReleaseError(f"row {row} of {path} did not verify; it cannot be released")
    cand = chosen["candidate"]
    if _differentially_private(cand["algorithm"]):
        raise EhrReleaseError(
            f"row {row} of {path} is {cand['algorithm']}, which is ε-differentially private: "
            "its parameters would be chosen by utility measured on the true data, which "
            "spends privacy budget its ledger does not count. Choose ε and h before looking "
            f"at the data and run `ehr-release run --algorithm {cand['algorithm']}` with them")
    return cand["algorithm"], dict(cand["params"]), report["dataset_fingerprint"]


def _differentially_private(algorithm: str) -> bool:
    """Asked of the registry, not of the file: a report written before the rule (or edited)
    must not release a DP row either. An unknown name is left to the run's own check."""
    from ehr_release.core.errors import ParameterError
    from ehr_release.registry import get

    try:
        return get(algorithm).differentially_private
    except ParameterError:
        return False
