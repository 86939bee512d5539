"""JSON Lines proven canonical and in shape by one pattern per line, before any parse.

The closed world requires every line of a JSON Lines file to parse, to match its declared
shape and to be exactly its declared rendering (:mod:`.canonical_bytes`); checked on the
parse, that costs a parse (every value a Python object, which the cycle collector then
walks), a column-wise type check and a re-rendering. For a plain file the three verdicts
follow from the bytes alone: a line that is the canonical rendering of a conforming value
matches one regular expression built from the spec, and only such a line does.

The pattern is deliberately narrower than the format (stricter, never more lenient): text
is printable ASCII without quote or backslash (nothing any encoder escapes), integers are
written as ``json.dumps`` writes them (no sign on zero, no leading zero) in at most 18
digits (within 64 bits), objects list their declared keys in declared order with
``json.dumps``' default separators. Any value such a line holds parses (``json.loads`` and
orjson alike) to a value of the declared shape that ``json.dumps`` renders back to the same
bytes. Specs with a number (floats render differently), a map (sorted keys) or alternatives
have no pattern, and a file that does not match falls to the full check, which names the
departure or accepts what the pattern is too narrow for: the verdict is the full check's
in every case.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ehr_release.privacy.canonical_bytes import Rendering
    from ehr_release.privacy.specs import Spec

_TEXT = r'"[\x20\x21\x23-\x5b\x5d-\x7e]*"'  # printable ASCII but '"' and '\'
_INT = r"(?:0|-?[1-9][0-9]{0,17})"
_BOOL = r"(?:true|false)"
_PLAIN = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]*")

# the last file that matched, and the pattern it matched (see lines_match)
_MATCHED: list[tuple[bytes, str] | None] = [None]


def pattern(spec: Spec) -> str | None:
    """The regular expression (text) of the canonical, default-separator rendering of every
    value matching ``spec`` within the narrow form above; None if ``spec`` holds a part
    the pattern does not cover."""
    from ehr_release.privacy.specs import Enum, ListOf, Nullable, Obj, TupleOf

    if isinstance(spec, str):
        return {"str": _TEXT, "int": _INT, "bool": _BOOL}.get(spec)
    if isinstance(spec, Nullable):
        inner = pattern(spec.spec)
        return None if inner is None else f"(?:null|{inner})"
    if isinstance(spec, Enum):
        return _enum(spec.values)
    if isinstance(spec, TupleOf):
        items = [pattern(s) for s in spec.items]
        if any(p is None for p in items):
            return None
        return r"\[" + ", ".join(items) + r"\]"  # type: ignore[arg-type]
    if isinstance(spec, ListOf):
        item = pattern(spec.item)
        return None if item is None else rf"\[(?:{item}(?:, {item})*)?\]"
    if isinstance(spec, Obj):
        fields = []
        for key, sub in spec.fields.items():
            value = pattern(sub)
            if value is None or not _PLAIN.fullmatch(key):
                return None
            fields.append(re.escape(json.dumps(key)) + ": " + value)
        return r"\{" + ", ".join(fields) + r"\}"
    return None  # number, MapOf, OneOf


def _enum(values: tuple[Any, ...]) -> str | None:
    rendered = []
    for v in values:
        if isinstance(v, str) and not _PLAIN.fullmatch(v):
            return None
        if isinstance(v, float) or not isinstance(v, str | int | bool | None):
            return None
        rendered.append(re.escape(json.dumps(v)))
    return "(?:" + "|".join(rendered) + ")" if rendered else None


def lines_match(data: bytes, spec: Spec, rendering: Rendering | None = None) -> bool:
    """Whether every line of ``data`` matches ``spec``'s pattern and ends with one newline
    (an empty file too): then each line parses to a value of that shape and is its
    canonical rendering. False when in doubt (no pattern, or a rendering with an indent or
    sorted keys); the caller then runs the full check.

    A match is remembered for the last file (that bytes object, held so its identity cannot
    be reused): the closed world and the model verifier read the same bytes one after the
    other, and the second asks again for free. :func:`forget` drops it.
    """
    if rendering is not None and (rendering.indent is not None or rendering.sort_keys):
        return False
    source = pattern(spec)
    if source is None:
        return False
    kept = _MATCHED[0]  # one read: another thread may replace it meanwhile
    if kept is not None and kept[0] is data and kept[1] == source:
        return True
    if data and not data.endswith(b"\n"):
        return False
    line = re.compile(source.encode("ascii"))
    if not all(map(line.fullmatch, data[:-1].split(b"\n") if data else ())):
        return False
    _MATCHED[0] = (data, source)
    return True


def forget() -> None:
    """Drop the remembered match (and the reference to its bytes)."""
    _MATCHED[0] = None
