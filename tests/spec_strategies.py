"""Hypothesis strategies for the closed world's declared shapes and for JSON values, shared
by the tests that hold two readers of those shapes to the same verdict."""

from __future__ import annotations

from hypothesis import strategies as st

from ehr_release.privacy.closed_world import Enum, ListOf, MapOf, Nullable, Obj, OneOf, TupleOf

SCALARS = st.sampled_from(["str", "int", "number", "bool"])


def specs(enum_values: tuple = ("a", 1, True), one_of_max: int = 3) -> st.SearchStrategy:
    """Random specs: every spec kind, nested, over keys a–c."""
    return st.recursive(
        SCALARS | st.just(Enum(enum_values)),
        lambda inner: st.one_of(
            inner.map(ListOf), inner.map(MapOf), inner.map(Nullable),
            st.lists(inner, min_size=1, max_size=3).map(lambda xs: TupleOf(tuple(xs))),
            st.lists(inner, min_size=1, max_size=one_of_max).map(lambda xs: OneOf(tuple(xs))),
            st.dictionaries(st.sampled_from("abc"), inner, max_size=3).map(Obj)),
        max_leaves=8)


def json_values(allow_nan: bool = True, strings: tuple[str, ...] = ("a", "")
                ) -> st.SearchStrategy:
    """Random JSON-like values over keys a–d (one more than specs use: undeclared keys)."""
    return st.recursive(
        st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=allow_nan)
        | st.sampled_from(strings),
        lambda inner: st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
        max_leaves=12)
