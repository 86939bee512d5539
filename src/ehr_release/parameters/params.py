"""Declared algorithm parameters, parsed and checked once where they enter.

The CLI hands over ``--param k=5`` as strings; the flow may hand over typed values. Both go
through :func:`parse_params`, which converts, applies defaults and checks each declared rule,
raising :class:`~ehr_release.core.errors.ParameterError` with one uniform message (which
parameter, which rule, what was given).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ehr_release.core.errors import ParameterError
from ehr_release.core.randomness import TEST_MODE_ENV, test_mode

#: Every algorithm's seed parameter has this name; a seed is refused outside test mode, and
#: a release request carrying one is refused on any site but a test site
#: (:func:`ehr_release.storage.site.refuse_seed_unless_test_site`, at the plan).
SEED = "seed"

REQUIRED: Any = object()

#: The words a boolean parameter accepts (lower case).
BOOL_WORDS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


@dataclass(frozen=True)
class Interval:
    """A number in a range, which words its own rule (scikit-learn's ``Interval`` idea).

    ``kind`` is ``int`` or ``float``; ``closed`` says which bounds are included. A float must
    also be finite. ``note`` adds what the range cannot say (``"and ≥ k"``).
    """

    kind: type
    low: float | None = None
    high: float | None = None
    closed: Literal["both", "left", "right", "neither"] = "both"
    note: str = ""

    def __call__(self, value: Any) -> bool:
        if self.kind is float and not math.isfinite(value):
            return False
        low_in = self.closed in ("both", "left")
        high_in = self.closed in ("both", "right")
        if self.low is not None and (value < self.low or (value == self.low and not low_in)):
            return False
        return self.high is None or value < self.high or (value == self.high and high_in)

    @property
    def rule(self) -> str:
        noun = ("an integer" if self.kind is int
                else "a number" if self.high is not None else "a finite number")
        low_in, high_in = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            text = (f"{noun} in {'[' if low_in else '('}{_num(self.low)}, "
                    f"{_num(self.high)}{']' if high_in else ')'}")
        elif self.low is not None:
            text = f"{noun} {'≥' if low_in else '>'} {_num(self.low)}"
        elif self.high is not None:
            text = f"{noun} {'≤' if high_in else '<'} {_num(self.high)}"
        else:
            text = noun
        return f"must be {text}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class OneOf:
    """One of a few listed values."""

    values: tuple[Any, ...]

    def __call__(self, value: Any) -> bool:
        return value in self.values

    @property
    def rule(self) -> str:
        words = [str(v) for v in self.values]
        listed = " or ".join(words) if len(words) == 2 else "one of " + ", ".join(words)
        return f"must be {listed}"


@dataclass(frozen=True)
class Satisfies:
    """Any other rule: a test on the value and the words for it (a syntax, a file)."""

    test: Callable[[Any], bool]
    rule: str

    def __call__(self, value: Any) -> bool:
        return self.test(value)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


#: What every constraint offers: a test, and the rule in words ("must be …").
Constraint = Interval | OneOf | Satisfies


@dataclass(frozen=True)
class Param:
    """One declared parameter of an algorithm.

    ``kind`` converts a string (``int``, ``float``, ``str`` or a custom callable);
    ``check`` is a :data:`Constraint` on the converted value, which words the rule the
    error message gives (e.g. ``Interval(int, 2)`` → ``"must be an integer ≥ 2"``).
    ``site_path`` marks a value that may name a file on the site's machine: published
    parameters keep only its file name (:func:`ehr_release.documents.datasheet.public_parameters`).
    ``example`` is a typical value a required parameter's error suggests.
    """

    name: str
    kind: Callable[[Any], Any]
    help: str
    default: Any = REQUIRED
    check: Constraint | None = None
    choices: tuple[str, ...] | None = None
    site_path: bool = False
    example: str | None = None  # a typical value, for the "is required" message

    @property
    def rule(self) -> str:
        return self.check.rule if self.check is not None else ""


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """Turn ``["k=5", "m=2"]`` into ``{"k": "5", "m": "2"}``; rejects malformed items."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ParameterError("--param", "must look like NAME=VALUE", item)
        name = name.strip()
        if name in out:
            raise ParameterError(name, "is given more than once", item)
        out[name] = value.strip()
    return out


def _convert(p: Param, value: Any) -> Any:
    if p.kind is int:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        return int(value)
    if p.kind is bool and isinstance(value, str):
        if value.lower() not in BOOL_WORDS:
            raise ValueError
        return BOOL_WORDS[value.lower()]
    return p.kind(value)


def parse_params(spec: Iterable[Param], given: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``given`` against ``spec``: unknown names, missing values, types and rules."""
    spec = list(spec)
    known = {p.name for p in spec}
    unknown = sorted(set(given) - known)
    if unknown:
        name = unknown[0]
        raise ParameterError(name, "is not a parameter", given[name], message=(
            f"{name!r} is not a parameter{did_you_mean(name, known)} "
            f"(known: {', '.join(sorted(known))})"))
    out: dict[str, Any] = {}
    for p in spec:
        if p.name not in given or given[p.name] is None:
            if p.default is REQUIRED:
                raise ParameterError(p.name, "is required", None, message=_required(p))
            out[p.name] = p.default
            continue
        raw = given[p.name]
        try:
            value = _convert(p, raw)
        except (TypeError, ValueError):
            raise ParameterError(p.name, f"must be {_kind_words(p)}", raw,
                                 message=f"{p.name} must be {_kind_words(p)}, got "
                                         f"{str(raw)!r}") from None
        if p.choices is not None and value not in p.choices:
            raise ParameterError(p.name, f"must be one of {', '.join(p.choices)}", raw)
        if p.check is not None and not p.check(value):
            raise ParameterError(p.name, p.rule, raw)
        if p.name == SEED and not test_mode():
            raise ParameterError(p.name, "is only accepted in test mode "
                                 f"({TEST_MODE_ENV}=1): the seed is recorded with the "
                                 "release, and anyone who knows it can replay its randomness "
                                 "(shuffles, picks, noise)", raw)
        out[p.name] = value
    return out


def allowed_values(p: Param) -> str:
    """What ``p`` accepts, in words for a person (``ehr-release algorithms``).

    Its choices, else its declared rule without the "must be" lead-in, else its type; a
    seed says that it is refused outside test mode.
    """
    kind = getattr(p.kind, "__name__", "value")
    if p.choices is not None:
        allowed = "one of " + ", ".join(p.choices)
    elif p.rule:
        allowed = (p.rule.removeprefix("must look like ").removeprefix("must be ")
                   .removeprefix("is "))
    else:
        allowed = {"int": "an integer", "float": "a number", "bool": "true or false",
                   "str": "text"}.get(kind, kind)
    if p.name == SEED and "test mode" not in allowed:
        allowed += f" (test mode only: {TEST_MODE_ENV}=1, on a test site)"
    return allowed


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'k'?"`` for the closest known name (difflib), else ``""``."""
    import difflib

    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _kind_words(p: Param) -> str:
    """The type a value must have, as a person says it."""
    kind = getattr(p.kind, "__name__", "")
    return {"int": "a whole number", "float": "a number", "bool": "true or false",
            "str": "text"}.get(kind, f"a valid {kind or 'value'}")


def _required(p: Param) -> str:
    """``"k is required: every … ≥ k records, e.g. --param k=5"``."""
    example = p.example or (_num(p.check.low) if isinstance(p.check, Interval)
                            and p.check.low is not None else "VALUE")
    return f"{p.name} is required: {p.help}, e.g. --param {p.name}={example}"
