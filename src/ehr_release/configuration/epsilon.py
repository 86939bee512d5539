"""ArtUC's suppression bound ε as the data owner writes it: a count, or a share of the codes.

Shared on purpose by the parameter check, the anonymizer's glue and the (k, k^m) verifier,
like the rest of :mod:`ehr_release.configuration`: it turns the owner's text into a number
and decides nothing about the data; every side must hold the release to the same ε. Light
(no pandas): the CLI checks parameters with it before anything heavy loads.
"""

from __future__ import annotations

import re

from ehr_release.core.errors import ParameterError

EPSILON_RULE = "must be a number of codes (e.g. 12) or a share of the distinct codes (e.g. 6%)"
EPSILON_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


def resolve_epsilon(text: str, distinct_codes: int, parameter: str = "epsilon") -> float:
    """``"6%"`` → 6 % of the distinct codes of the input; ``"12"`` → 12.

    Raises
    ------
    ParameterError
        Naming ``parameter`` when ``text`` is neither form.
    """
    match = EPSILON_PATTERN.match(text)
    if match is None:
        raise ParameterError(parameter, EPSILON_RULE, text)
    value = float(match[1])
    return value * distinct_codes / 100.0 if match[2] else value
