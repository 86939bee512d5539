"""The folder layout is the architecture (issue 36): no import circles, no upward imports,
and nothing loose at the package root but the command line, the service façade and the
package's faces.

The import graph is read from the source with ``ast`` (every import, the lazy ones inside
functions too, but not those under ``if TYPE_CHECKING:``, which never run), so a circle a
lazy import hides is still found. ``LAYERS`` is the picture of ``docs/architecture.md``
from the bottom up: a module imports only from its own package or from packages in lower
layers, and packages side by side in one layer do not import each other (``algorithms`` and
``privacy`` share no code: the privacy wall).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "ehr_release"

#: What may sit at the package root besides the packages.
ROOT_MODULES = {"__init__", "cli", "service", "version"}

#: Bottom to top; a root module counts as a package of its own name.
LAYERS: list[set[str]] = [
    {"__init__"},
    {"version", "core"},
    {"model", "parameters"},
    {"configuration", "ingest", "samples", "reading"},
    {"algorithms", "privacy"},
    {"utility", "runtime"},
    {"registry"},
    {"storage"},
    {"planning", "governance"},
    {"documents", "release"},
    {"comparison", "history"},
    {"tasks"},
    {"flows"},
    {"service"},
    {"dashboard", "cli_support"},
    {"commands"},
    {"cli"},
]


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if "migrations" in parts and "versions" in parts:
            continue  # Alembic revisions: loaded by path, never imported
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports (a package for ``from pkg import module``
    resolves to the module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and _type_checking(node) for n in ast.walk(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target.startswith("ehr_release") and (hit := resolve(target)) and hit != name:
                out.add(hit)
    return out


@cache
def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imported(name, path, known) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"package {package!r} is in no layer of tests/test_architecture.py "
                         "(and docs/architecture.md): place it")


def test_the_import_graph_reads_lazy_imports_and_skips_type_checking(tmp_path: Path) -> None:
    """The reader itself: a function-level import counts, a TYPE_CHECKING one does not."""
    source = tmp_path / "probe.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from ehr_release.cli import app\n"
                      "def f():\n    from ehr_release.core import errors\n")
    known = {"ehr_release.cli", "ehr_release.core", "ehr_release.core.errors"}
    assert imported("ehr_release.probe", source, known) == {"ehr_release.core.errors"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles() -> None:
    assert cycles(graph()) == []


def test_every_package_has_a_layer() -> None:
    for module in graph():
        layer_of(package_of(module))


def test_no_upward_or_sideways_imports() -> None:
    """A module imports its own package or a lower layer — never a higher one, never a
    neighbour in its own layer."""
    wrong = []
    for module, targets in graph().items():
        mine = package_of(module)
        for target in targets:
            theirs = package_of(target)
            if theirs != mine and layer_of(theirs) >= layer_of(mine):
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_the_root_holds_only_the_cli_the_service_and_the_faces() -> None:
    loose = {p.stem for p in PKG.glob("*.py")}
    assert loose - ROOT_MODULES == set(), "place these modules in a package named for their job"


@pytest.mark.parametrize("package", sorted(p.name for p in PKG.iterdir()
                                           if p.is_dir() and (p / "__init__.py").exists()))
def test_every_package_says_what_it_is_for(package: str) -> None:
    docstring = ast.get_docstring(ast.parse((PKG / package / "__init__.py").read_text()))
    assert docstring, f"{package}/__init__.py: no docstring saying what the package is for"
