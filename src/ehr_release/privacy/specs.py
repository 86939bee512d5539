"""The words a closed-world declaration is written in: the value specs.

A spec is one of: a scalar type name (``"str"``, ``"int"``, ``"number"``, ``"bool"``),
:class:`ListOf`, :class:`TupleOf` (a fixed-length array), :class:`Obj` (exact keys),
:class:`MapOf` (any string keys, one value spec — for keys that are codes or labels),
:class:`Enum` (fixed values), :class:`Nullable` or :class:`OneOf` (any of several specs).

In a module of their own so that the checks (:mod:`ehr_release.privacy.closed_world`) and
the canonical renderings they compare bytes with (``canonical_bytes``, ``canonical_lines``,
``json_columns``) read the same words without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ListOf:
    """A JSON array whose every element matches ``item``."""

    item: Spec


@dataclass(frozen=True)
class Obj:
    """A JSON object with exactly these keys (no key missing, none extra)."""

    fields: Mapping[str, Spec]


@dataclass(frozen=True)
class MapOf:
    """A JSON object whose keys are data-independent labels or codes, all values ``value``."""

    value: Spec


@dataclass(frozen=True)
class Enum:
    """One of a fixed set of JSON scalar values."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class Nullable:
    """``null`` or a value matching ``spec``."""

    spec: Spec


@dataclass(frozen=True)
class TupleOf:
    """A JSON array of exactly ``len(items)`` elements, the i-th matching ``items[i]``.

    For fixed-shape pairs such as LDA's ``["401", [33, 36]]`` (code, age block).
    """

    items: tuple[Spec, ...]


@dataclass(frozen=True)
class OneOf:
    """A value matching at least one of ``specs``.

    For values whose kind the configuration decides, such as a (k, k^m) record's
    demographics: ``[low, high]`` for a numerical attribute, a hierarchy node for a
    categorical one.
    """

    specs: tuple[Spec, ...]


Spec = str | ListOf | Obj | MapOf | Enum | Nullable | TupleOf | OneOf
