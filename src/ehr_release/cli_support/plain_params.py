"""Plain command-line values without Pydantic, so parsing a command stays cheap.

Typer (0.2x) coerces every parameter's value through a Pydantic ``TypeAdapter`` built on
first use: importing Pydantic and building the adapters cost ≈ 0.1 s of CPU before a
command runs — a third of what ``--help``, ``status`` and ``list`` may take (issue 37 goal
3), and ``status --help`` paid it for an option it never read. Our commands take plain
``str``, ``int`` and ``bool`` values almost everywhere; for those, a value that already is
what the annotation asks for (a ``str`` for ``str``, an ``int`` or a string of ASCII digits
for an ``int`` without bounds, a ``bool`` for ``bool``) is returned here exactly as Typer's
adapter would return it. Everything else — a parser, a choice, a path, a list, a bounded or
malformed number — goes to Typer's own coercion, built when first needed, so its checks and
messages are unchanged. If Typer's internals move, :func:`install` leaves Typer as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

_NOT_PLAIN = object()
_installed = False


def plain_value(annotation: Any, value: Any) -> Any:
    """``value`` as its annotation's type when no validation can change or refuse it; else
    the marker ``_NOT_PLAIN`` (Typer's own coercion decides)."""
    if annotation is str and isinstance(value, str):
        return value
    if annotation is bool and isinstance(value, bool):
        return value
    if annotation is int:
        if type(value) is int:
            return value
        if isinstance(value, str) and value.isascii() and value.isdigit():
            return int(value)
    return _NOT_PLAIN


def _is_plain(descriptor: Any) -> bool:
    """A parameter this module may short-cut: ``str``, ``bool`` or ``int``, with no parser,
    choices, file, path options or bounds."""
    info = descriptor.parameter_info
    return (descriptor.annotation in (str, bool, int) and info.parser is None
            and descriptor.file_annotation is None and not descriptor.is_choice
            and not descriptor.is_path and info.min is None and info.max is None)


def install() -> None:
    """Route Typer's plain parameters through :func:`plain_value` (once per process)."""
    global _installed
    if _installed:
        return
    try:
        from typer import core
        from typer._coercion import RuntimeParam, TypeDescriptor
    except ImportError:  # Typer reorganised: keep its own coercion
        return
    typer_build = getattr(core, "build_runtime_param", None)
    if typer_build is None:
        return

    @dataclass(frozen=True)
    class PlainRuntimeParam(RuntimeParam):  # type: ignore[misc,valid-type]
        """Plain values here; any other value through Typer's adapter, built lazily."""

        descriptor: TypeDescriptor  # type: ignore[valid-type]

        @cached_property
        def typer_param(self) -> Any:
            return typer_build(self.descriptor)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            plain = plain_value(self.annotation, value)
            if plain is not _NOT_PLAIN:
                return plain
            return self.typer_param._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: Any) -> Any:
        if not _is_plain(descriptor):
            return typer_build(descriptor)
        return PlainRuntimeParam(parameter_info=descriptor.parameter_info,
                                 annotation=descriptor.annotation, descriptor=descriptor)

    core.build_runtime_param = build
    _installed = True
