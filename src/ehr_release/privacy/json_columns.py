"""JSON Lines read in one C-level pass and checked column by column (issue 18, goal 2).

A million-line release parsed with ``json.loads`` line by line, then walked value by value
in Python, costs most of its verification. Here every non-blank line is parsed by orjson
through ``map`` (no Python code runs per line) and a declared shape is checked per *column*:
the values of one field across all lines gathered with ``operator.itemgetter`` or
``itertools.chain`` and their types compared as a set, so the Python work is per field, not
per value.

The fast pass may only ever be *stricter* than the per-line reader it stands in for, never
more lenient: orjson refuses what ``json.loads`` accepts beyond RFC 8259 (``NaN``,
``Infinity``, lone surrogates) and reads integers beyond 64 bits as floats, which fail an
``int`` field; types are compared exactly, so ``true`` is no ``int`` and ``1.0`` no ``int``.
Whenever the fast pass cannot vouch for a file, callers run the per-line reader, which
either names the departure or, for the rare input orjson alone refuses, accepts it as
before: the verdict is the per-line reader's in every case, only its cost changes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import chain
from operator import itemgetter
from typing import Any

import orjson

from ehr_release.privacy.specs import Enum, ListOf, MapOf, Nullable, Obj, Spec, TupleOf

# the last parse (loads_lines) and the specs its values were found to conform to
_KEPT: list[tuple[bytes, list[Any] | None, list[Spec]] | None] = [None]
_TYPES: dict[str, frozenset[type]] = {
    "str": frozenset({str}), "int": frozenset({int}), "bool": frozenset({bool}),
    "number": frozenset({int, float}),
}


def loads_lines(data: bytes) -> list[Any] | None:
    """Every line of ``data`` that is not blank, parsed; None if one is not RFC 8259 JSON in
    UTF-8 (the caller's per-line reader then says which, or accepts it).

    Bytes, not text: orjson reads UTF-8 bytes without the copy a ``str`` costs it. A line of
    Unicode-only whitespace (blank to ``str.strip``, not to ``bytes.strip``) fails here and
    is left to the per-line reader.

    The closed-world check and the model verifier read the same bytes object one after the
    other (:func:`ehr_release.release.verification.verify_release`): the last parse is kept, keyed
    by that object's identity (held, so the identity cannot be reused), and the second
    reader takes it instead of parsing again. The values are shared, so readers must not
    modify them.
    """
    kept = _KEPT[0]  # one read: another thread may replace it meanwhile
    if kept is not None and kept[0] is data:
        return kept[1]
    parsed = parse_lines(data)
    _KEPT[0] = (data, parsed, [])
    return parsed


def parse_lines(data: bytes) -> list[Any] | None:
    """:func:`loads_lines` without keeping the parse (for a reader that comes alone)."""
    try:
        with paused_gc():
            return list(map(orjson.loads, filter(bytes.strip, data.split(b"\n"))))
    except orjson.JSONDecodeError:
        return None


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cycle collector off while acyclic values are built in bulk.

    Parsed JSON holds no reference cycles, so no collection during the parse can free
    anything; yet every few hundred new lists and dicts trigger one, and the older
    generations' passes walk every object alive — the caller's original data included.
    Measured on a 27,639-line LDA release held next to its original trajectories: the parse
    takes 0.05–0.07 CPU s with the collector off, 0.5–0.7 s with it on. The collector is
    switched back on (if it was on) whatever happens; cycles made meanwhile elsewhere are
    collected then.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def forget() -> None:
    """Drop the kept parse (its memory) once the readers of one release are done."""
    _KEPT[0] = None


def all_conform(values: Iterable[Any], spec: Spec) -> bool:
    """Whether every value matches ``spec`` (False when in doubt: the caller then checks
    value by value). Specs not handled column-wise (``OneOf``) answer False.

    For the kept parse (:func:`loads_lines`) a spec found to hold is remembered, so the
    model verifier, checking the closed world's parse against the same line spec, does not
    walk every value again (values are shared and never modified)."""
    kept = _KEPT[0]
    if kept is None or kept[1] is not values:
        return _conform(values, spec)
    if spec in kept[2]:
        return True
    if not _conform(values, spec):
        return False
    kept[2].append(spec)
    return True


def _conform(values: Iterable[Any], spec: Spec) -> bool:
    values = values if isinstance(values, list) else list(values)
    if not values:
        return True
    if isinstance(spec, str):
        return set(map(type, values)) <= _TYPES[spec]
    if isinstance(spec, Nullable):
        return _conform([v for v in values if v is not None], spec.spec)
    if isinstance(spec, Enum):
        allowed = {(type(v), v) for v in spec.values}
        try:
            return set(zip(map(type, values), values, strict=True)) <= allowed
        except TypeError:  # an unhashable value (array, object) is in no enum
            return False
    if isinstance(spec, TupleOf):
        if set(map(type, values)) != {list} or set(map(len, values)) != {len(spec.items)}:
            return False
        return all(_conform(list(map(itemgetter(i), values)), sub)
                   for i, sub in enumerate(spec.items))
    if isinstance(spec, ListOf):
        return set(map(type, values)) == {list} and _conform(
            list(chain.from_iterable(values)), spec.item)
    if isinstance(spec, MapOf):
        return set(map(type, values)) == {dict} and _conform(
            list(chain.from_iterable(map(dict.values, values))), spec.value)
    if isinstance(spec, Obj):
        if set(map(type, values)) != {dict} or set(map(len, values)) != {len(spec.fields)}:
            return False
        try:
            return all(_conform(list(map(itemgetter(key), values)), sub)
                       for key, sub in spec.fields.items())
        except KeyError:  # as many keys as declared, but not the declared ones
            return False
    return False
