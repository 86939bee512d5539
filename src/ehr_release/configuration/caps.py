"""GCCens' caps policy: the data owner's declared limit on repeated instances of a code.

Shared on purpose by the parameter check, the anonymizer's glue, the verifier and the
evaluation, like the rest of :mod:`ehr_release.configuration`: it only turns the owner's text
into typed values and takes no decision about the data, and every side must judge against
the same declared policy.
"""

from __future__ import annotations

import re

from ehr_release.core.errors import ParameterError
from ehr_release.model.hierarchy import normalize_icd9

_CAP_ITEM = re.compile(r"^\s*([^:\s]+)\s*:\s*(-?\d+)\s*$")
CAPS_RULE = ("must be 'max', one integer cap ≥ 0 for every code, or CODE:CAP pairs "
             "separated by commas with caps ≥ 0 ('*:CAP' for unlisted codes)")


def parse_caps(text: str) -> dict[str, int]:
    """``"max"`` → {}; ``"3"`` → {"*": 3}; ``"250:2, *:0"`` → {"250": 2, "*": 0}.

    Raises
    ------
    ParameterError
        On anything else, including negative caps and a code listed twice.
    """
    text = text.strip()
    if text in {"", "max"}:
        return {}
    if re.fullmatch(r"-?\d+", text):
        return _checked({"*": int(text)}, text)
    out: dict[str, int] = {}
    for item in text.split(","):
        match = _CAP_ITEM.match(item)
        if match is None:
            raise ParameterError("caps", CAPS_RULE, text)
        code = match[1] if match[1] == "*" else normalize_icd9(match[1])
        if code in out:
            raise ParameterError("caps", f"lists code {code} more than once", text)
        out[code] = int(match[2])
    return _checked(out, text)


def _checked(caps: dict[str, int], text: str) -> dict[str, int]:
    if any(v < 0 for v in caps.values()):
        raise ParameterError("caps", CAPS_RULE, text)
    return caps


def caps_ok(text: str) -> bool:
    try:
        parse_caps(text)
    except ParameterError:
        return False
    return True


