"""Reading one row of a written comparison report — no Prefect, so the CLI stays quick.

``ehr-release run --from-comparison DIR --row N`` checks the row before any server starts.
"""

from __future__ import annotations

import json
import os

from ehr_release.errors import EhrReleaseError


def load_comparison_row(folder: str, row: int) -> tuple[str, dict[str, str], str]:
    """(algorithm, params, dataset fingerprint) of one row of a written comparison."""
    path = os.path.join(folder, "comparison.json")
    try:
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
        rows = report["rows"]
    except (OSError, ValueError, KeyError) as exc:
        raise EhrReleaseError(f"cannot read comparison {path}: {exc}") from None
    if not 0 <= row < len(rows):
        raise EhrReleaseError(f"comparison {path} has rows 0–{len(rows) - 1}; got {row}")
    chosen = rows[row]
    if not chosen.get("verified"):
        raise EhrReleaseError(f"row {row} of {path} did not verify; it cannot be released")
    cand = chosen["candidate"]
    return cand["algorithm"], dict(cand["params"]), report["dataset_fingerprint"]
