"""The closed world's fast conformance test gives the same verdict as the checker that
names where a value departs (the fast one skips path strings on the common, passing path)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.privacy.closed_world import (
    Enum,
    ListOf,
    MapOf,
    Nullable,
    OneOf,
    ShapeError,
    TupleOf,
    _check,
    _conforms,
)
from tests import spec_strategies

specs = spec_strategies.specs()
values = spec_strategies.json_values(allow_nan=False, strings=("a", "x", ""))


def _checker_accepts(value, spec) -> bool:
    try:
        _check(value, spec, "")
    except ShapeError:
        return False
    return True


@given(spec=specs, value=values)
@settings(max_examples=2000, deadline=None)
def test_fast_and_naming_checks_agree(spec, value) -> None:
    assert _conforms(value, spec) == _checker_accepts(value, spec)


@given(spec=specs, data=st.data())
@settings(max_examples=300, deadline=None)
def test_agreement_on_values_shaped_like_the_spec(spec, data) -> None:
    """Random values rarely conform; build ones that mostly do, then perturb nothing."""
    def build(s):
        if isinstance(s, str):
            return {"str": "v", "int": 1, "number": 1.5, "bool": True}[s]
        if isinstance(s, Enum):
            return s.values[0]
        if isinstance(s, Nullable):
            return None if data.draw(st.booleans()) else build(s.spec)
        if isinstance(s, ListOf):
            return [build(s.item) for _ in range(data.draw(st.integers(0, 2)))]
        if isinstance(s, MapOf):
            return {"k": build(s.value)}
        if isinstance(s, TupleOf):
            return [build(x) for x in s.items]
        if isinstance(s, OneOf):
            return build(s.specs[0])
        return {k: build(v) for k, v in s.fields.items()}

    value = build(spec)
    assert _conforms(value, spec) and _checker_accepts(value, spec)


def test_a_nullable_parquet_column_takes_nulls_at_the_top_only() -> None:
    """Disassociation's long table marks an empty subrecord by a null code: declared, it
    passes; the same null in an undeclared column, or inside a list, fails."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ehr_release.privacy.canonical_parquet import ParquetRendering
    from ehr_release.privacy.closed_world import FileSchema, ReleaseSchema, violations

    def parquet(table: pa.Table) -> bytes:
        out = io.BytesIO()
        pq.write_table(table, out, store_schema=False)
        return out.getvalue()

    def schema(columns: dict) -> ReleaseSchema:
        return ReleaseSchema(files=(FileSchema(
            name="t.parquet", format="parquet", columns=columns,
            parquet_rendering=ParquetRendering(options=(("store_schema", False),))),))

    flat = {"t.parquet": parquet(pa.table({"code": pa.array(["401.9", None])}))}
    assert list(violations(flat, schema({"code": Nullable("str")}))) == []
    assert list(violations(flat, schema({"code": "str"}))) == [
        "t.parquet: column 'code' holds a null value"]
    nested = {"t.parquet": parquet(pa.table({"codes": pa.array([["401.9", None]])}))}
    assert list(violations(nested, schema({"codes": Nullable(ListOf("str"))}))) == [
        "t.parquet: column 'codes' holds a null value"]
