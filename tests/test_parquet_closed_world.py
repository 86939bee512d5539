"""Every Parquet release file must be exactly its declared writer's rendering of its columns.

A shape check reads names, types and nulls; a reader of the columns never sees bytes placed
before the footer, row-group boundaries, dictionary entries no row uses or what a declared
note (``pandas``, ``ARROW:schema``) holds. Each of those carried a planted patient value
through the closed world, the model verifier and the attack audit alike on main (privacy
audit, issue 18); here each is planted in an honest release of every Parquet format and must
fail the closed world, while the honest bytes still pass.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ehr_release import registry
from ehr_release.algorithms.artuc import artuc, release_files
from ehr_release.configuration.constraints import rt_data
from ehr_release.privacy.closed_world import (
    _read_columns,
    closed_world_requirement,
    violations,
)
from ehr_release.samples.sample import generate_sample
from tests.test_artuc_worked_example import SEED, worked_example
from tests.test_diffgen_counts_check import make_release

SECRET = b"patient 10006: 042, age 37"


def _disassociation() -> dict[str, bytes]:
    entry = registry.get("disassociation")
    return entry.anonymize(generate_sample(120, seed=14), entry.parse({"k": "3", "m": "2"}),
                           np.random.default_rng(14))


def _diffgen() -> dict[str, bytes]:
    _, data, params = make_release(n=200, h=3)
    return registry.get("diffgen").anonymize(data, {**params, "format": "parquet"},
                                             np.random.default_rng(1))


def _kkm() -> dict[str, bytes]:
    ds, cfg = worked_example()
    return release_files(artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                               rng=np.random.default_rng(SEED)))


RELEASES = {"disassociation": ("disassociation", "release.parquet", _disassociation),
            "diffgen": ("diffgen", "groups.parquet", _diffgen),
            "kkm": ("artuc", "records.parquet", _kkm)}


@pytest.fixture(scope="module", params=sorted(RELEASES))
def release(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, bytes]]:
    algorithm, name, make = RELEASES[request.param]
    return algorithm, name, make()


def _before_footer(data: bytes) -> bytes:
    """The secret between the last column chunk and the footer: no offset moves."""
    footer = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
    return data[:footer] + SECRET + data[footer:]


def _row_groups(algorithm: str, name: str, data: bytes) -> bytes:
    """The same rows with the declared options, cut into row groups of 2, 1 and the rest
    rows (their sizes are a channel: they could spell a true count)."""
    rendering = registry.get(algorithm).schema.file(name).parquet_rendering
    options = {k: v for k, v in rendering.options if k != "row_group_size"}
    table = pq.read_table(io.BytesIO(data))
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, table.schema, **options) as writer:
        for start, size in ((0, 2), (2, 1), (3, None)):
            writer.write_table(table.slice(start, size))
    return sink.getvalue()


def _before_footer_of(algorithm: str, name: str, data: bytes) -> bytes:
    return _before_footer(data)


def _unused_dictionary_entry(algorithm: str, name: str, data: bytes) -> bytes:
    """The first text column dictionary-encoded with one more entry, which no row uses: it
    is stored in the dictionary page, where no reader of the column looks."""
    import pyarrow.compute as pc

    rendering = registry.get(algorithm).schema.file(name).parquet_rendering
    table = pq.read_table(io.BytesIO(data))
    index = next(i for i, f in enumerate(table.schema) if pa.types.is_string(f.type))
    encoded = pc.dictionary_encode(table.column(index).combine_chunks())
    entries = pa.array([*encoded.dictionary.to_pylist(), SECRET.decode()], pa.string())
    planted = pa.DictionaryArray.from_arrays(encoded.indices, entries)
    field = pa.field(table.schema.field(index).name, planted.type,
                     table.schema.field(index).nullable)
    sink = io.BytesIO()
    pq.write_table(table.set_column(index, field, planted), sink, **dict(rendering.options))
    stored = pq.read_table(io.BytesIO(sink.getvalue()), read_dictionary=[field.name])
    assert SECRET.decode() in stored.column(index).chunk(0).dictionary.to_pylist()
    return sink.getvalue()


def _dictionary_order(algorithm: str, name: str, data: bytes) -> bytes:
    """The dictionary of the text column with most values stored in reverse order (the
    indices follow): a writer choosing the order of the entries could spell anything in
    it, and a reader of the column sees the same values."""
    import pyarrow.compute as pc

    rendering = registry.get(algorithm).schema.file(name).parquet_rendering
    table = pq.read_table(io.BytesIO(data))
    index = max((i for i, f in enumerate(table.schema) if pa.types.is_string(f.type)),
                key=lambda i: pc.count_distinct(table.column(i)).as_py())
    encoded = pc.dictionary_encode(table.column(index).combine_chunks())
    size = len(encoded.dictionary)
    assert size >= 2, "the column needs two values to reorder"
    reverse = pa.array(np.arange(size - 1, -1, -1), pa.int32())
    planted = pa.DictionaryArray.from_arrays(
        pc.take(reverse, encoded.indices), pc.take(encoded.dictionary, reverse))
    field = pa.field(table.schema.field(index).name, planted.type,
                     table.schema.field(index).nullable)
    sink = io.BytesIO()
    options = {} if rendering.via_pandas else dict(rendering.options)
    pq.write_table(table.set_column(index, field, planted), sink, **options)
    return sink.getvalue()


def _other_codec(algorithm: str, name: str, data: bytes) -> bytes:
    """The same table compressed with another codec: which codec (or level) a writer
    picks is a choice no reader of the columns sees."""
    rendering = registry.get(algorithm).schema.file(name).parquet_rendering
    options = {} if rendering.via_pandas else dict(rendering.options)
    options = {k: v for k, v in options.items() if k != "compression_level"}
    options["compression"] = "gzip" if options.get("compression") != "gzip" else "snappy"
    sink = io.BytesIO()
    pq.write_table(pq.read_table(io.BytesIO(data)), sink, **options)
    return sink.getvalue()


TAMPERS: dict[str, Callable[[str, str, bytes], bytes]] = {
    "bytes before the footer": _before_footer_of, "row groups": _row_groups,
    "unused dictionary entry": _unused_dictionary_entry,
    "dictionary order": _dictionary_order, "other codec": _other_codec}


def test_honest_bytes_pass(release) -> None:
    algorithm, _, files = release
    assert list(violations(files, registry.get(algorithm).schema)) == []


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_channel_outside_the_columns_fails_the_closed_world(release, tamper: str) -> None:
    algorithm, name, files = release
    planted = TAMPERS[tamper](algorithm, name, files[name])
    assert pq.read_table(io.BytesIO(planted)).to_pydict() == \
        pq.read_table(io.BytesIO(files[name])).to_pydict(), "the columns must read the same"
    requirement = closed_world_requirement({**files, name: planted},
                                           registry.get(algorithm).schema)
    assert not requirement.passed
    assert "declared writer's rendering" in requirement.measured
    assert "10006" not in requirement.measured + repr(requirement.evidence)


def _diffgen_with(note: Callable[[pa.Table], pa.Table]) -> dict[str, bytes]:
    """A DiffGen release whose groups table carries ``note`` inside its declared notes."""
    files = _diffgen()
    sink = io.BytesIO()
    pq.write_table(note(pq.read_table(io.BytesIO(files["groups.parquet"]))), sink)
    return {**files, "groups.parquet": sink.getvalue()}


def _true_counts_in_pandas_note(table: pa.Table) -> pa.Table:
    note = json.loads(table.schema.metadata[b"pandas"])
    return table.replace_schema_metadata({"pandas": json.dumps({**note, "true": [37, 1]})})


def _field_note_in_arrow_schema(table: pa.Table) -> pa.Table:
    index = table.schema.get_field_index("count")
    return table.cast(table.schema.set(index, table.schema.field(index).with_metadata(
        {"true": "37"})))


@pytest.mark.parametrize("note", [_true_counts_in_pandas_note, _field_note_in_arrow_schema])
def test_a_value_inside_a_declared_note_fails(note: Callable[[pa.Table], pa.Table]) -> None:
    """The ``pandas`` and ``ARROW:schema`` keys are declared; what they hold must be pandas'
    own rendering of the columns, not anything a writer adds."""
    requirement = closed_world_requirement(_diffgen_with(note), registry.get("diffgen").schema)
    assert not requirement.passed
    assert "declared writer's rendering" in requirement.measured


def test_a_parquet_file_without_a_declared_rendering_fails_closed() -> None:
    from ehr_release.privacy.closed_world import FileSchema, ReleaseSchema

    sink = io.BytesIO()
    pq.write_table(pa.table({"code": ["401.9"]}), sink, store_schema=False)
    schema = ReleaseSchema(files=(FileSchema(name="t.parquet", format="parquet",
                                             columns={"code": "str"}),))
    assert list(violations({"t.parquet": sink.getvalue()}, schema)) == [
        "t.parquet: declares no Parquet rendering, so its bytes cannot be checked"]


def test_the_closed_world_reads_the_columns_a_plain_read_gives():
    """Text read through the Parquet dictionaries holds the same values, nulls and types."""
    table = pa.table({
        "n": pa.array([1, None, 3, 4, 5, 6], pa.int64()),
        "s": pa.array(["a", None, "b", "a", "", "é"], pa.string()),
        "big": pa.array(["x", "y", None, "x", "z", "x"], pa.large_string()),
        "cat": pa.array(["u", "v", "u", None, "v", "u"]).dictionary_encode(),
        "list": pa.array([["a"], [], None, ["b", None], ["a"], ["c"]]),
    })
    for store_schema in (True, False):
        sink = io.BytesIO()
        pq.write_table(table, sink, row_group_size=2, store_schema=store_schema)
        data = sink.getvalue()
        parquet = pq.ParquetFile(io.BytesIO(data))
        got, plain = _read_columns(data, parquet), parquet.read()
        assert got.schema == plain.schema
        assert got.equals(plain)
