"""Closed world: a release is exactly its declared files and fields, nothing more.

A verifier that checks the privacy model on the fields it knows says nothing about a field it
does not know: a per-record count, an ordering key or a stray file can single a patient out
while the model still holds. So before any model check, every release file is checked
against the verifier's own declaration of the format: the exact set of files, and per file the
exact fields and value types. Anything undeclared fails the verification, naming the file,
the line or row and the field — never the value, which may be a patient's.

The declarations live with the verifiers (``privacy/``), not with the algorithms: they are
the verifier's independent reading of the published format, and ``to_json_schema`` renders
them for the format documentation.

Specs are written in the words of :mod:`ehr_release.privacy.specs` (re-exported here, where
every declaration imports them from).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Any, Literal

from ehr_release.model.reports import Requirement
from ehr_release.privacy.canonical_bytes import Rendering, document_problem, lines_problem
from ehr_release.privacy.canonical_parquet import ParquetRendering, parquet_problem
from ehr_release.privacy.release_tree import Stray
from ehr_release.privacy.specs import (  # noqa: F401  (re-exported: declarations import them here)
    Enum,
    ListOf,
    MapOf,
    Nullable,
    Obj,
    OneOf,
    Spec,
    TupleOf,
)

#: What a refusal says instead of an undeclared name (see :func:`undeclared`).
WITHHELD = "(name withheld: an undeclared name may carry a value)"

SCALARS = ("str", "int", "number", "bool")

#: A row of the format documentation that no check pins down yet (``FileSchema.checked_by``).
NOT_CHECKED = "NOT CHECKED"


TYPE_WORDS = {"str": "text", "int": "integer", "number": "number", "bool": "true/false"}


@dataclass(frozen=True)
class FileSchema:
    """One release file: its exact name, its format and the shape of its content.

    ``json``: ``root`` is the spec of the whole document. ``jsonl``: ``root`` is the spec of
    every non-blank line. ``csv`` and ``parquet``: ``columns`` maps each column, in order, to
    a scalar type name (``parquet`` also: a :class:`ListOf` a scalar, a :class:`OneOf` such
    specs, or a :class:`Nullable` one, whose top-level values may be null); no other Parquet
    value may be null, and the file may carry no key-value metadata but the keys in
    ``metadata`` (e.g. the ``pandas`` schema note of a table pandas wrote), since a writer
    can put anything there. ``doc`` says in one line what the file is for;
    ``fields_doc`` says per field why it is safe to publish (the closed-world review, shown in
    the format docs).
    ``columns_from``, for a table whose columns the run's public configuration decides (e.g.
    DiffGen's predictors), derives ``columns`` from the release's other, declared files; a
    release it cannot derive them from departs from the schema.
    ``rendering`` (JSON and JSON Lines) is how the writer renders the content: the bytes
    must be exactly that rendering of what they parse to (:mod:`.canonical_bytes`), so
    spacing, escapes, key order or a repeated key can carry nothing.
    ``parquet_rendering`` (Parquet, required) is the same for a table: the bytes must be
    exactly that writer's rendering of their columns (:mod:`.canonical_parquet`), so bytes
    no reader of the columns sees (before the footer, in row-group boundaries, statistics or
    a declared note's content) can carry nothing.
    ``review_keys_from`` maps each derived column to its placeholder row in ``fields_doc``
    (see :meth:`for_release`).
    ``codes_column`` names the column in which a table publishes the source's diagnosis
    codes in its own form (one code per row, generalized-code ids), so a certificate can say
    the codes are released although no column bears the source's name.
    ``derived_columns`` is set on the copy checked against one release: the column names
    ``columns_from`` read from that release, which are data a message must not repeat.
    ``checked_by`` says, per row of ``fields_doc`` (a key covers the rows under it too:
    ``charges`` covers ``charges[].scale``), which check pins the field, order or rendering
    down — the closed world, a named requirement of the model verifier, the attack audit —
    or :data:`NOT_CHECKED` where nothing does yet; the format documentation shows it, and a
    test fails on a row without one.
    """

    name: str
    format: Literal["json", "jsonl", "csv", "parquet"]
    root: Spec | None = None
    columns: Mapping[str, Spec] = field(default_factory=dict)
    optional: bool = False
    metadata: tuple[str, ...] = ()
    doc: str = ""
    fields_doc: Mapping[str, str] = field(default_factory=dict)
    columns_from: Callable[[Mapping[str, bytes]], Mapping[str, Spec]] | None = None
    codes_column: str | None = None
    rendering: Rendering | None = None
    parquet_rendering: ParquetRendering | None = None
    review_keys_from: Callable[[Mapping[str, bytes]], Mapping[str, str]] | None = None
    derived_columns: frozenset[str] = frozenset()
    checked_by: Mapping[str, str] = field(default_factory=dict)

    def for_release(self, files: Mapping[str, bytes]) -> FileSchema:
        """This declaration with the columns ``columns_from`` derives for ``files``, each
        with its review: ``review_keys_from`` names the placeholder row of ``fields_doc``
        (e.g. ``<predictor>``) a derived column answers to, so a datasheet reviews every
        column it lists, not only the placeholder."""
        if self.columns_from is None:
            return self
        columns = dict(self.columns_from(files))
        keys = dict(self.review_keys_from(files)) if self.review_keys_from else {}
        reviews = {column: self.fields_doc[key] for column, key in keys.items()
                   if key in self.fields_doc}
        placeholders = set(keys.values())
        rest = {path: text for path, text in self.fields_doc.items()
                if path not in placeholders}
        return replace(self, columns=columns, fields_doc={**reviews, **rest})


@dataclass(frozen=True)
class ReleaseSchema:
    """Every file a release of one format may hold."""

    files: tuple[FileSchema, ...]

    def file(self, name: str) -> FileSchema:
        return next(f for f in self.files if f.name == name)


class ShapeError(ValueError):
    """Where a release departs from its declared shape (file, position, field; no value)."""


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


_SCALAR: dict[str, Any] = {
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def _conforms(value: Any, spec: Spec) -> bool:
    """Whether ``value`` matches ``spec`` — the same verdict as :func:`_check`, fast.

    The check walks every element of a release (a million records hold tens of millions of
    codes), so the common case builds no path strings: only a value that does not conform
    is walked again by :func:`_check`, which names where it departs.
    """
    if isinstance(spec, str):
        return bool(_SCALAR[spec](value))
    if isinstance(spec, Nullable):
        return value is None or _conforms(value, spec.spec)
    if isinstance(spec, Enum):
        return any(value == v and type(value) is type(v) for v in spec.values)
    if isinstance(spec, OneOf):
        return any(_conforms(value, sub) for sub in spec.specs)
    if isinstance(spec, TupleOf):
        return (isinstance(value, list) and len(value) == len(spec.items)
                and all(_conforms(v, sub) for v, sub in zip(value, spec.items, strict=True)))
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            return False
        if spec.item == "str":  # codes: the bulk of every release, checked in C
            return all(map(isinstance, value, repeat(str)))
        if isinstance(spec.item, str):
            ok = _SCALAR[spec.item]
            return all(ok(v) for v in value)
        return all(_conforms(v, spec.item) for v in value)
    if not isinstance(value, dict):
        return False
    if isinstance(spec, MapOf):
        return all(_conforms(v, spec.value) for v in value.values())
    return (len(value) == len(spec.fields) and all(k in value for k in spec.fields)
            and all(_conforms(value[k], sub) for k, sub in spec.fields.items()))


def _require(value: Any, spec: Spec) -> None:
    """Raise :class:`ShapeError` naming where ``value`` departs from ``spec``, if it does."""
    if _conforms(value, spec):
        return
    _check(value, spec, "")
    raise ShapeError("does not match its declared shape")  # fail closed should they differ


def _check(value: Any, spec: Spec, path: str) -> None:
    if isinstance(spec, str):
        got = _type_name(value)
        if got == spec or (spec == "number" and got == "int"):
            return
        raise ShapeError(f"field {path or '(root)'} must be {describe(spec)}, found {got}")
    if isinstance(spec, Nullable):
        if value is not None:
            _check(value, spec.spec, path)
        return
    if isinstance(spec, Enum):
        if not any(value == v and type(value) is type(v) for v in spec.values):
            raise ShapeError(f"field {path or '(root)'} must be one of the declared values")
        return
    if isinstance(spec, OneOf):
        for sub in spec.specs:
            try:
                _check(value, sub, path)
            except ShapeError:
                continue
            return
        raise ShapeError(f"field {path or '(root)'} matches none of its declared forms")
    if isinstance(spec, TupleOf):
        if not isinstance(value, list) or len(value) != len(spec.items):
            raise ShapeError(f"field {path or '(root)'} must be an array of "
                             f"{len(spec.items)} elements")
        for i, (item, sub) in enumerate(zip(value, spec.items, strict=True)):
            _check(item, sub, f"{path}[{i}]")
        return
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise ShapeError(f"field {path or '(root)'} must be an array, found "
                             f"{_type_name(value)}")
        for i, item in enumerate(value):
            _check(item, spec.item, f"{path}[{i}]")
        return
    if not isinstance(value, dict):
        raise ShapeError(f"field {path or '(root)'} must be an object, found "
                         f"{_type_name(value)}")
    if isinstance(spec, MapOf):
        for item in value.values():
            _check(item, spec.value, f"{path}.*" if path else "*")
        return
    if set(value) - set(spec.fields):
        # A key name is data-independent only if declared: an undeclared one is not repeated,
        # since a hostile key could itself carry a value (the path holds declared names only).
        raise ShapeError(f"an undeclared field in {path or 'the record'} {WITHHELD}")
    missing = sorted(set(spec.fields) - set(value))
    if missing:
        raise ShapeError(f"declared field {_join(path, missing[0])} is missing")
    for key, sub in spec.fields.items():
        _check(value[key], sub, _join(path, key))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def undeclared(what: str, names: list[str], declared: Collection[str]) -> str:
    """'an undeclared column at position 3 (…)': where, never what. An undeclared name was
    written by code the release's model does not cover, so it may carry a patient value (a
    diagnosis code pivoted into a header, a patient's id as a file name); the message is
    stored in artifacts and certificates, so it names the position and leaves the name to
    whoever can open the run's own files."""
    positions = [i for i, name in enumerate(names, start=1) if name not in declared]
    where = f"at position {positions[0]}" if len(positions) == 1 else \
        f"at positions {', '.join(map(str, positions[:5]))}" + (" …" if len(positions) > 5 else "")
    return f"{len(positions)} undeclared {what}{'s' if len(positions) != 1 else ''} {where} " \
           f"{WITHHELD}"


def _csv_value_ok(text: str, kind: str) -> bool:
    """``text`` is a value of ``kind`` in the one spelling ``to_csv`` writes for it.

    A number reads the same written ``7``, ``07``, ``+7``, `` 7`` or ``0_7``, so a
    writer choosing the spelling cell by cell would publish what no reader of the values
    sees (as spacing would in JSON: :mod:`.canonical_bytes`); only the canonical one passes.
    """
    if kind == "str":
        return True
    if kind == "bool":
        return text in {"True", "False"}
    try:
        value = int(text) if kind == "int" else float(text)
    except ValueError:
        return False
    return text == (str(value) if kind == "int" else repr(value))


def _parquet_kind_ok(arrow_type: Any, kind: Spec) -> bool:
    import pyarrow as pa

    if isinstance(kind, OneOf):
        return any(_parquet_kind_ok(arrow_type, sub) for sub in kind.specs)
    if isinstance(kind, Nullable):
        return _parquet_kind_ok(arrow_type, kind.spec)
    if isinstance(kind, ListOf):
        return bool((pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type))
                    and _parquet_kind_ok(arrow_type.value_type, kind.item))
    if not isinstance(kind, str):
        return False
    checks = {
        "str": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)
        or pa.types.is_dictionary(t) and pa.types.is_string(t.value_type),
        "int": pa.types.is_integer,
        "number": lambda t: pa.types.is_integer(t) or pa.types.is_floating(t),
        "bool": pa.types.is_boolean,
    }
    return bool(checks[kind](arrow_type))


def _nulls(column: Any) -> int:
    """Null values in a column, inside its lists too (a null's position is a value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = column.null_count
    while pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        column = pc.list_flatten(column)
        found += column.null_count
    return int(found)


def _column(schema: FileSchema, name: str) -> str:
    """'column 'code'' for a column the schema names itself, 'column 3' for one whose name
    ``columns_from`` read from the release: a derived name is data the message must not
    repeat (the model verifier, not the closed world, vouches for it)."""
    if name not in schema.derived_columns:
        return f"column {name!r}"
    return f"column {list(schema.columns).index(name) + 1} (a derived column)"


def _read_columns(data: bytes, parquet: Any) -> Any:
    """The table ``parquet.read()`` gives, its text columns decoded through their Parquet
    dictionaries: a writer stores text dictionary-encoded, and decoding each distinct value
    once, then taking it per row, is a third of the work of decoding every row's string (a
    million-record release has millions of codes). The result holds the same values, nulls
    and types as the plain read, so the rendering compared with the bytes is the same."""
    import pyarrow as pa

    types = {f.name: f.type for f in parquet.schema_arrow}
    text = [name for name, t in types.items() if t in (pa.string(), pa.large_string())]
    if not text:
        return parquet.read()
    table = _reopened(data, parquet.metadata, text).read()
    for name in text:
        i = table.schema.get_field_index(name)
        table = table.set_column(i, table.schema.field(i).with_type(types[name]),
                                 table.column(i).cast(types[name]))
    return table


def _reopened(data: bytes, metadata: Any, read_dictionary: list[str]) -> Any:
    """``data`` opened again with its parsed footer, ``read_dictionary`` columns as read."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(io.BytesIO(data), metadata=metadata, read_dictionary=read_dictionary)


def _check_parquet(schema: FileSchema, data: bytes) -> None:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
        arrow_schema = parquet.schema_arrow
        keys = sorted(k.decode("utf-8", "replace")
                      for k in (parquet.metadata.metadata or {}))
    except Exception:  # noqa: BLE001 - any unreadable parquet is a shape failure
        raise ShapeError("is not a readable Parquet file") from None
    names = list(arrow_schema.names)
    if names != list(schema.columns):
        raise ShapeError(_columns_message(names, list(schema.columns)))
    for name, kind in schema.columns.items():
        if not _parquet_kind_ok(arrow_schema.field(name).type, kind):
            raise ShapeError(f"{_column(schema, name)} must be {describe(kind)}")
    if any(k not in schema.metadata for k in keys):
        raise ShapeError(undeclared("file metadata key", keys, schema.metadata))
    table = _read_columns(data, parquet)
    for name, kind in schema.columns.items():
        column = table.column(name)
        # A Nullable column may hold nulls at the top level, never inside its lists.
        allowed = column.null_count if isinstance(kind, Nullable) else 0
        if _nulls(column) > allowed:
            raise ShapeError(f"{_column(schema, name)} holds a null value")
    if schema.parquet_rendering is None:  # fail closed: any byte could carry anything
        raise ShapeError("declares no Parquet rendering, so its bytes cannot be checked")
    _raise_if(parquet_problem(data, table, schema.parquet_rendering))


def describe(spec: Spec) -> str:
    """A declared type in words, for the refusal messages and for the format documentation
    (:mod:`ehr_release.documents.formats_doc`): one wording, so what a message says is what the
    datasheet promised."""
    if isinstance(spec, str):
        return TYPE_WORDS[spec]
    if isinstance(spec, Nullable):
        return f"{describe(spec.spec)} or null"
    if isinstance(spec, Enum):
        return "one of " + ", ".join(repr(v) for v in spec.values)
    if isinstance(spec, ListOf):
        return f"list of {describe(spec.item)}"
    if isinstance(spec, MapOf):
        return f"object: label → {describe(spec.value)}"
    if isinstance(spec, TupleOf):
        return "[" + ", ".join(describe(s) for s in spec.items) + "]"
    if isinstance(spec, OneOf):
        return " or ".join(describe(s) for s in spec.specs)
    return "object"


def _check_file(schema: FileSchema, data: bytes) -> None:
    if schema.format == "parquet":
        _check_parquet(schema, data)
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ShapeError("is not UTF-8 text") from None
    if schema.format == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        header = rows[0] if rows else []
        if header != list(schema.columns):
            raise ShapeError(_columns_message(header, list(schema.columns)))
        kinds = list(schema.columns.values())
        for no, row in enumerate(rows[1:], start=2):
            if len(row) != len(kinds):
                raise ShapeError(f"row {no} has {len(row)} fields, declared {len(kinds)}")
            for name, kind, cell in zip(schema.columns, kinds, row, strict=True):
                if not _csv_value_ok(cell, kind):
                    raise ShapeError(f"row {no}, {_column(schema, name)} must be "
                                     f"{describe(kind)}")
        _raise_if(_csv_rendering_problem(text, rows))
        return
    assert schema.root is not None, f"{schema.name}: json/jsonl schemas need a root spec"
    if schema.format == "json":
        try:
            document = json.loads(text)
        except json.JSONDecodeError:
            raise ShapeError("is not JSON") from None
        _require(document, schema.root)
        if schema.rendering is not None:
            _raise_if(document_problem(text, document, schema.root, schema.rendering))
        return
    from ehr_release.privacy.canonical_lines import lines_match
    from ehr_release.privacy.json_columns import all_conform, loads_lines

    if lines_match(data, schema.root, schema.rendering):  # in shape and canonical, unparsed
        return
    objects = loads_lines(data)  # fast and never more lenient; else line by line, naming
    if objects is None or not all_conform(objects, schema.root):
        objects = []
        for no, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                raise ShapeError(f"line {no} is not JSON") from None
            try:
                _require(obj, schema.root)
            except ShapeError as exc:
                raise ShapeError(f"line {no}: {exc}") from None
            objects.append(obj)
    if schema.rendering is not None:
        _raise_if(lines_problem(data, objects, schema.root, schema.rendering))


def _csv_rendering_problem(text: str, rows: list[list[str]]) -> str | None:
    """A CSV file must be exactly ``csv.writer``'s rendering of its cells (minimal quoting,
    one ``\\n`` per row, as pandas' ``to_csv(lineterminator="\\n")`` writes): quoting some
    cells and not others, or other line ends, would be a channel no verifier reads."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)  # ``text`` parsed once, by the caller
    if out.getvalue() == text:
        return None
    for no, (ours, theirs) in enumerate(zip(out.getvalue().split("\n"), text.split("\n"),
                                            strict=False), start=1):
        if ours != theirs:
            return f"row {no} is not the canonical CSV rendering of its cells (quoting, " \
                   "spacing or line end)"
    return "is not the canonical CSV rendering of its rows (line ends)"


def _raise_if(problem: str | None) -> None:
    if problem is not None:
        raise ShapeError(problem)


def _columns_message(found: list[str], declared: list[str]) -> str:
    missing = [c for c in declared if c not in found]
    if any(c not in declared for c in found):
        return undeclared("column", found, declared)
    if missing:
        return f"declared column {missing[0]!r} is missing"
    return "columns are not in the declared order"


def stray_violations(strays: Collection[Stray], declared: Collection[str]) -> Iterator[str]:
    """The folder entries that are not top-level regular files (:mod:`.release_tree`).

    A declared (or envelope) name is data-independent, so a link or folder standing in for
    one is named; any other entry is given by its kind and its position in the walk (paths
    in sorted order), never its name, which may carry a value.
    """
    named = [s for s in strays if s.top and s.path in declared]
    for stray in named:
        yield (f"declared file {stray.path!r} is {_a(stray.kind)}, not a regular file (a link "
               "or special file can point anywhere or change after the check)")
    rest = [(i, s) for i, s in enumerate(strays, start=1) if s not in named]
    if rest:
        where = ", ".join(f"{_a(s.kind)} at position {i}" for i, s in rest[:5])
        more = f" and {len(rest) - 5} more" if len(rest) > 5 else ""
        yield (f"{len(rest)} undeclared entr{'y' if len(rest) == 1 else 'ies'} in the release "
               f"folder's tree: {where}{more} (positions in path order; {WITHHELD[1:-1]})")


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def violations(files: Mapping[str, bytes], schema: ReleaseSchema) -> Iterator[str]:
    """Every departure from ``schema``, one line each, files in name order.

    ``files`` read from a folder (:func:`.release_tree.walk_release`) also carries the
    folder's other entries, its strays: each is a departure (the closed world is the whole
    tree, not the files a reader picked).
    """
    declared = {f.name: f for f in schema.files}
    from ehr_release.privacy.release_files import ENVELOPE

    yield from stray_violations(getattr(files, "strays", ()), {*declared, *ENVELOPE})
    if any(name not in declared for name in files):
        yield undeclared("file", sorted(files), declared) + " (positions in name order)"
    for name, file_schema in sorted(declared.items()):
        if name not in files:
            if not file_schema.optional:
                yield f"declared file {name!r} is missing"
            continue
        if file_schema.columns_from is not None:
            try:
                columns = dict(file_schema.columns_from(files))
            except Exception:  # noqa: BLE001 - any underivable column list is a departure
                yield f"{name}: its columns cannot be derived from the release"
                continue
            derived = frozenset(columns) - set(file_schema.columns)
            file_schema = replace(file_schema, columns=columns, derived_columns=derived)
        try:
            _check_file(file_schema, files[name])
        except ShapeError as exc:
            yield f"{name}: {exc}"


def closed_world_requirement(files: Mapping[str, bytes],
                             schema: ReleaseSchema | None) -> Requirement:
    """'The release holds only declared files, fields and value types', measured."""
    required = "only the declared files, fields and value types (see the format docs)"
    if schema is None:  # fail closed: an undeclared format can carry anything
        return Requirement("closed world", required, "no release schema declared for this "
                           "algorithm", False)
    found = list(violations(files, schema))
    measured = (f"{len(found)} departure(s); first: {found[0]}" if found else
                f"{len(files)} file(s), every field declared")
    return Requirement("closed world", required, measured, not found,
                       {"departures": found[:10]})


def to_json_schema(spec: Spec) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12 vocabulary) of a spec, for the format documentation."""
    if isinstance(spec, str):
        return {"type": {"str": "string", "int": "integer", "number": "number",
                         "bool": "boolean"}[spec]}
    if isinstance(spec, Nullable):
        return {"anyOf": [{"type": "null"}, to_json_schema(spec.spec)]}
    if isinstance(spec, Enum):
        return {"enum": list(spec.values)}
    if isinstance(spec, ListOf):
        return {"type": "array", "items": to_json_schema(spec.item)}
    if isinstance(spec, TupleOf):
        return {"type": "array", "prefixItems": [to_json_schema(s) for s in spec.items],
                "items": False}
    if isinstance(spec, OneOf):
        return {"anyOf": [to_json_schema(s) for s in spec.specs]}
    if isinstance(spec, MapOf):
        return {"type": "object", "additionalProperties": to_json_schema(spec.value)}
    return {"type": "object", "properties": {k: to_json_schema(v) for k, v in spec.fields.items()},
            "required": list(spec.fields), "additionalProperties": False}
