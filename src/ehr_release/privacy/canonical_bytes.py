"""A JSON file must be exactly one rendering of its content: the bytes carry nothing else.

Two files with the same parsed content can differ in spacing, escapes, key order and repeated
keys (``{"a": 1, "a": 2}`` reads as ``{"a": 2}`` here, as ``{"a": 1}`` in a first-wins
reader). None of that is in the privacy model, yet a researcher receives it: a writer that
listed a patient's codes in the order they were recorded (chronological), or that spaced a
line differently for some patients, would publish a field no verifier looked at. So every
JSON or JSON Lines file declares its :class:`Rendering` — the ``json.dumps`` options its
writer uses, and whether keys follow the declaration — and the closed world requires the
bytes to equal that rendering of what they parse to.

Cost: one rendering of all lines at once (see :func:`_lines_rendered`) and key orders
compared column-wise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from ehr_release.privacy.specs import Spec


@dataclass(frozen=True)
class Rendering:
    """How a file's writer renders JSON: ``json.dumps``'s ``indent``, ``sort_keys`` and
    ``ensure_ascii``, and ``declared_order`` — every object's keys in the order its
    :class:`~ehr_release.privacy.specs.Obj` declares them and every map's keys sorted
    (what ``sort_keys`` would do for maps while objects keep a readable order)."""

    indent: int | None = None
    sort_keys: bool = False
    ensure_ascii: bool = True
    declared_order: bool = False

    def render(self, value: Any) -> str:
        return json.dumps(value, indent=self.indent, sort_keys=self.sort_keys,
                          ensure_ascii=self.ensure_ascii)


#: What a departure may be, for the message (never the content: it may be a patient's).
_DEPARTURES = "spacing, escapes, number form, key order or a repeated key"


def document_problem(text: str, document: Any, spec: Spec, rendering: Rendering) -> str | None:
    """Why ``text`` (a whole JSON document, parsed to ``document``) is not its declared
    rendering followed by one newline; None when it is."""
    if text != rendering.render(document) + "\n":
        return f"is not the canonical rendering of its content ({_DEPARTURES})"
    if rendering.declared_order and not _in_declared_order([document], spec):
        return "lists keys out of their declared order (maps' keys must be sorted)"
    return None


def lines_problem(data: bytes, objects: list[Any], spec: Spec,
                  rendering: Rendering) -> str | None:
    """Why ``data`` (JSON Lines, whose non-blank lines parse to ``objects``) is not each
    object's declared rendering on its own line, each line ended by one newline; None
    when it is."""
    assert rendering.indent is None, "a JSON Lines rendering has no indent"
    if not data and not objects:
        return None
    if not data.endswith(b"\n") or not _lines_rendered(data[:-1], objects, spec, rendering):
        return _first_departure(data.decode("utf-8"), rendering)
    if rendering.declared_order and not _in_declared_order(objects, spec):
        for no, obj in enumerate(objects, start=1):
            if not _in_declared_order([obj], spec):
                return f"line {no} lists keys out of their declared order (maps' keys " \
                       "must be sorted)"
    return None


def _lines_rendered(body: bytes, objects: list[Any], spec: Spec, rendering: Rendering) -> bool:
    """Whether ``body`` is the objects' renderings joined by newlines.

    Raw newlines only separate lines (inside a JSON string a newline is escaped), and a list
    renders its items exactly as each would render alone, joined by ``", "``; so the file is
    compared with one rendering of the whole list.

    Fast form (measured: 0.3 s instead of 3.6 s for ``json.dumps`` of 1M GCCens lines): when
    the file holds no backslash (no escape at all), the spec has no float and the rendering
    is ``json.dumps``' default separators without ``sort_keys``, the rendering is orjson's
    compact one with a space put after every comma and colon. That space would also land
    inside a string holding a comma or colon, but then the comparison fails: the file's
    string would have to read as its own value with spaces added, which no finite string
    does. Any failure of the fast form is re-decided by ``json.dumps`` itself.
    """
    if (not rendering.sort_keys and b"\\" not in body and not _has_number(spec)
            and (not rendering.ensure_ascii or body.isascii())):
        try:
            spaced = orjson.dumps(objects).replace(b",", b", ").replace(b":", b": ")
        except TypeError:  # an integer beyond 64 bits: json.dumps decides
            spaced = b""
        if spaced == b"[" + body.replace(b"\n", b", ") + b"]":
            return True
    text = body.decode("utf-8")
    return rendering.render(objects) == "[" + text.replace("\n", ", ") + "]"


def _has_number(spec: Spec) -> bool:
    """Whether a float may occur (orjson and ``json.dumps`` write some floats differently)."""
    from ehr_release.privacy.specs import Enum, ListOf, MapOf, Nullable, Obj, OneOf, TupleOf

    if isinstance(spec, str):
        return spec == "number"
    if isinstance(spec, Enum):
        return any(isinstance(v, float) for v in spec.values)
    if isinstance(spec, Nullable):
        return _has_number(spec.spec)
    if isinstance(spec, ListOf):
        return _has_number(spec.item)
    if isinstance(spec, MapOf):
        return _has_number(spec.value)
    if isinstance(spec, Obj):
        return any(map(_has_number, spec.fields.values()))
    if isinstance(spec, TupleOf):
        return any(map(_has_number, spec.items))
    if isinstance(spec, OneOf):
        return any(map(_has_number, spec.specs))
    return True


def _first_departure(text: str, rendering: Rendering) -> str:
    """The line to name (slow; only once the file is known to depart)."""
    if not text.endswith("\n"):
        return "must end each line, the last too, with one newline"
    for no, line in enumerate(text[:-1].split("\n"), start=1):
        if not line.strip():
            return f"line {no} is blank"
        if rendering.render(json.loads(line)) != line:
            return f"line {no} is not the canonical rendering of its content ({_DEPARTURES})"
    return f"is not the canonical rendering of its lines ({_DEPARTURES})"


def _in_declared_order(values: list[Any], spec: Spec) -> bool:
    """Whether every object lists its declared keys in order and every map its keys sorted,
    at every depth; column-wise (one pass per field, not per value). The values already
    conform to ``spec``."""
    from ehr_release.privacy.specs import ListOf, MapOf, Nullable, Obj, TupleOf

    if not _has_keys(spec):  # only lists and scalars below: no key order to check
        return True
    if isinstance(spec, Nullable):
        return _in_declared_order([v for v in values if v is not None], spec.spec)
    if not values:
        return True
    if isinstance(spec, Obj):
        keys = tuple(spec.fields)
        return set(map(tuple, values)) == {keys} and all(
            _in_declared_order(list(map(itemgetter(key), values)), sub)
            for key, sub in spec.fields.items())
    if isinstance(spec, MapOf):
        if isinstance(spec.value, str):  # scalar values: orjson sorts keys as sorted() does
            try:
                return orjson.dumps(values) == orjson.dumps(values,
                                                            option=orjson.OPT_SORT_KEYS)
            except TypeError:  # an integer beyond 64 bits
                pass
        return list(map(list, values)) == list(map(sorted, values)) and _in_declared_order(
            list(chain.from_iterable(map(dict.values, values))), spec.value)
    if isinstance(spec, ListOf):
        return _in_declared_order(list(chain.from_iterable(values)), spec.item)
    if isinstance(spec, TupleOf):
        return all(_in_declared_order(list(map(itemgetter(i), values)), sub)
                   for i, sub in enumerate(spec.items))
    return True


def _has_keys(spec: Spec) -> bool:
    """Whether an object or a map may occur at or below ``spec``."""
    from ehr_release.privacy.specs import ListOf, MapOf, Nullable, Obj, OneOf, TupleOf

    if isinstance(spec, Obj | MapOf):
        return True
    if isinstance(spec, Nullable):
        return _has_keys(spec.spec)
    if isinstance(spec, ListOf):
        return _has_keys(spec.item)
    if isinstance(spec, TupleOf):
        return any(map(_has_keys, spec.items))
    if isinstance(spec, OneOf):
        return any(map(_has_keys, spec.specs))
    return False
