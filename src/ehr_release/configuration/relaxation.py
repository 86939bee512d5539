"""ArtUC's Algorithm 2 (``relax=true``): the data owner's ceilings, read once for every side.

The anonymizer's glue relaxes up to them, the (k, k^m) verifier holds the release to them and
the utility report shows which were used; all three must read the same numbers from the same
text, so they share this reader on purpose (like the rest of :mod:`ehr_release.configuration`:
parameters in, values out, nothing about the data decided here). Light: no pandas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ehr_release.configuration.epsilon import resolve_epsilon
from ehr_release.core.errors import ParameterError


@dataclass(frozen=True)
class Ceilings:
    """What a release made with Algorithm 2 was asked for — δ and ε — and the most the owner
    accepts when relaxing them: the largest NCP and the most codes suppressed."""

    delta: float
    epsilon: float
    delta_max: float
    epsilon_max: float


def relax_ceilings(params: Mapping[str, Any], distinct_codes: int) -> Ceilings | None:
    """The ceilings when ``relax`` is on, else None (only ArtUC declares ``relax``).

    ε and its ceiling are resolved against ``distinct_codes`` (a share is of the input's
    distinct codes). An unset ``relax_epsilon`` keeps ε; ``relax_delta`` defaults to 1.

    Raises
    ------
    ParameterError
        When a ceiling is below what it relaxes (relax_delta < delta, relax_epsilon < ε) or
        the text of ε or its ceiling is malformed.
    """
    if not params.get("relax", False):
        return None
    delta = float(params["delta"])
    epsilon = resolve_epsilon(str(params["epsilon"]), distinct_codes)
    delta_max = float(params.get("relax_delta", 1.0))
    if delta_max < delta:
        raise ParameterError("relax_delta", f"must be ≥ delta ({delta:g}): it is the largest "
                             "NCP the owner accepts when relaxing δ", delta_max)
    text = str(params.get("relax_epsilon") or "").strip()
    epsilon_max = resolve_epsilon(text, distinct_codes, "relax_epsilon") if text else epsilon
    if epsilon_max < epsilon:
        raise ParameterError("relax_epsilon", f"must be ≥ epsilon ({epsilon:g}): it is the most "
                             "codes suppressed the owner accepts when relaxing ε", text)
    return Ceilings(delta, epsilon, delta_max, epsilon_max)
