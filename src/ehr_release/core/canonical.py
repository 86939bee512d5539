"""Canonical JSON: the one text form of a value that is hashed, stored or compared.

Why a module of its own: the audit chain hashes it, the run table stores parameters in it,
cache keys and release manifests are written in it. They must all produce the same text for
the same content, so the rule lives in one place that depends on nothing else.
"""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same content always gives the same text.

    Values JSON does not know (dates, paths) are written as their ``str``.

    Examples
    --------
    >>> canonical_json({"b": 1, "a": ["é", 2]})
    '{"a":["é",2],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
