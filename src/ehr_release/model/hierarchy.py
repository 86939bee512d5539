"""The diagnosis hierarchies shipped with the package: ICD-9-CM and ICD-10-CM.

Each extract is coded in one :class:`CodeSystem` (``icd9`` or ``icd10``, declared or
detected when it is read, kept on the :class:`~ehr_release.model.dataset.Dataset`); every part that
generalizes codes asks :func:`code_hierarchy` for that system's tree. Both trees have the same
levels, so ``3digit|section|chapter`` mean the same everywhere: ICD-10-CM's category, block
and chapter (ROOT → 22 chapters → blocks → categories ``E11`` → subcategories ``E11.9`` down
to 7-character codes ``S72.001A``; see ``scripts/export_icd10cm_hierarchy.py``).

ICD-9-CM: ROOT → 19 chapters → 184 sections → 3-digit categories → 4th digit → 5th digit.
Codes are written dotted (``296.01``, ``V45.81``, ``E849.7``); MIMIC writes them undotted, so
:func:`normalize_icd9` puts the dot back (after the 3rd character, the 4th for E codes).
Any node of the hierarchy is a valid code, not only leaves: the papers' fixtures use
internal nodes such as ``493.2`` or ``250``.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

ROOT = "ROOT"
_UNDOTTED = re.compile(r"^(?:E\d{3,4}|[V\d]\d{2,4})$")
_UNDOTTED10 = re.compile(r"^[A-Z][0-9A-Z]{2}[0-9A-Z]{1,4}$")  # QA0.0: 2026 has letters 2nd


def normalize_icd9(raw: str) -> str:
    """Return the dotted form of an ICD-9 code (whitespace stripped, upper case).

    Already-dotted codes and range nodes (``290-319``) are returned unchanged.
    """
    code = raw.strip().upper()
    if "." in code or "-" in code or not _UNDOTTED.match(code):
        return code
    cut = 4 if code.startswith("E") else 3
    return code if len(code) <= cut else f"{code[:cut]}.{code[cut:]}"


def normalize_icd10(raw: str) -> str:
    """Return the dotted form of an ICD-10-CM code (``E119`` → ``E11.9``, as OMOP's
    ``condition_source_value`` and MIMIC-IV write them); dotted codes and blocks unchanged."""
    code = raw.strip().upper()
    if "." in code or "-" in code or not _UNDOTTED10.match(code):
        return code
    return f"{code[:3]}.{code[3:]}"


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A rooted tree of string nodes with parent links; immutable once built.

    Compared and hashed by identity so derived views (children, leaves) can be cached.
    """

    parent: dict[str, str]
    level: dict[str, int]
    title: dict[str, str] = field(default_factory=dict)
    root: str = ROOT

    def __contains__(self, node: object) -> bool:
        return node == self.root or node in self.parent

    @property
    def children(self) -> dict[str, list[str]]:
        return _children(self)

    def ancestors(self, node: str) -> Iterator[str]:
        """Yield the proper ancestors of ``node``, nearest first, ending with the root."""
        while node in self.parent:
            node = self.parent[node]
            yield node

    def leaves_under(self, node: str) -> list[str]:
        """All leaves of the subtree rooted at ``node`` (the node itself if it is a leaf)."""
        return _leaves_under(self, node)

    def is_leaf(self, node: str) -> bool:
        return node not in self.children

    def ancestor_at_level(self, node: str, level: int) -> str:
        """The ancestor-or-self of ``node`` at ``level`` (0 is the root)."""
        if self.level[node] <= level:
            return node
        for up in self.ancestors(node):
            if self.level[up] <= level:
                return up
        return self.root

    def common_ancestor(self, nodes: Iterable[str]) -> str:
        """The closest common ancestor-or-self of all ``nodes``."""
        it = iter(nodes)
        first = next(it)
        path = [first, *self.ancestors(first)]
        depth_of = {n: i for i, n in enumerate(path)}
        best = 0
        for node in it:
            for cand in (node, *self.ancestors(node)):
                if cand in depth_of:
                    best = max(best, depth_of[cand])
                    break
        return path[best]


@cache
def _children(h: Hierarchy) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {}
    for child, par in h.parent.items():
        kids.setdefault(par, []).append(child)
    for v in kids.values():
        v.sort()
    return kids


@cache
def _leaves_under(h: Hierarchy, node: str) -> list[str]:
    kids = h.children.get(node)
    if not kids:
        return [node]
    out: list[str] = []
    for k in kids:
        out.extend(_leaves_under(h, k))
    return out


def hierarchy_from_frame(frame: Mapping[str, Sequence[Any]] | Any,
                         root: str | None = None) -> Hierarchy:
    """Build a hierarchy from a ``code,parent[,short_description]`` table.

    ``frame`` is anything indexed by column name (a DataFrame, or a dict of lists: the
    packaged hierarchy is read without pandas, so the CLI can check codes before pandas
    loads). The root is the one parentless node unless ``root`` names it.
    """
    parent = {
        str(c): str(p)
        for c, p in zip(frame["code"], frame["parent"], strict=True)
        if isinstance(p, str) and p
    }
    roots = {p for p in parent.values() if p not in parent}
    if root is None:
        if len(roots) != 1:
            raise ValueError(f"hierarchy must have exactly one root, found {sorted(roots)}")
        root = roots.pop()
    level: dict[str, int] = {root: 0}

    def depth(n: str) -> int:
        if n not in level:
            level[n] = depth(parent[n]) + 1
        return level[n]

    for n in parent:
        depth(n)
    titles = {}
    if "short_description" in frame:
        titles = {c: t if isinstance(t, str) else ""
                  for c, t in zip(frame["code"], frame["short_description"], strict=True)}
    return Hierarchy(parent=parent, level=level, title=titles, root=root)


@dataclass(frozen=True)
class CodeSystem:
    """One diagnosis coding system: its name in options and files, its words on documents,
    the edition of the packaged hierarchy, and how a raw code is written the dotted way."""

    name: str
    label: str
    edition: str
    data_file: str
    normalize: Callable[[str], str]

    @property
    def short(self) -> str:
        """``ICD-9`` / ``ICD-10``: the words of the one-line input messages."""
        return self.label.removesuffix("-CM")

    def hierarchy(self) -> Hierarchy:
        return _packaged(self.data_file)


def _edition(name: str) -> str:
    return (resources.files("ehr_release") / "data" / name).read_text(encoding="utf-8").strip()


ICD9 = "icd9"
ICD10 = "icd10"
CODE_SYSTEMS: dict[str, CodeSystem] = {
    ICD9: CodeSystem(ICD9, "ICD-9-CM", "ICD-9-CM 2015 (the final edition)",
                     "icd9cm_hierarchy.csv", normalize_icd9),
    ICD10: CodeSystem(ICD10, "ICD-10-CM", _edition("icd10cm_edition.txt"),
                      "icd10cm_hierarchy.csv.gz", normalize_icd10),
}


def code_system(name: str) -> CodeSystem:
    """The code system called ``name`` (``icd9`` or ``icd10``); ValueError otherwise."""
    try:
        return CODE_SYSTEMS[name]
    except KeyError:
        raise ValueError(f"unknown code system {name!r}; expected one of "
                         f"{', '.join(CODE_SYSTEMS)}") from None


_SCHEMA_CODES = re.compile(r"^multiset\[(\w+)\]")


def schema_code_system(schema: Mapping[str, str]) -> str | None:
    """The code system a dataset's stored schema names (``codes: multiset[icd10]+age`` →
    ``icd10``; see :meth:`ehr_release.model.dataset.Dataset.schema`), None without codes."""
    found = _SCHEMA_CODES.match(schema.get("codes", ""))
    return found.group(1) if found else None


def code_hierarchy(name: str = ICD9) -> Hierarchy:
    """The packaged hierarchy of the code system ``name`` (loaded once per process)."""
    return code_system(name).hierarchy()


@cache
def _packaged(data_file: str) -> Hierarchy:
    path = resources.files("ehr_release") / "data" / data_file
    with resources.as_file(path) as p, p.open("rb") as raw:
        data = gzip.decompress(raw.read()) if data_file.endswith(".gz") else raw.read()
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    columns = {name: [row[name] for row in rows] for name in ("code", "parent",
                                                             "short_description")}
    return hierarchy_from_frame(columns, root=ROOT)


def icd9_hierarchy() -> Hierarchy:
    """The packaged ICD-9-CM (2015) hierarchy, loaded once per process."""
    return _packaged(CODE_SYSTEMS[ICD9].data_file)


def icd10_hierarchy() -> Hierarchy:
    """The packaged ICD-10-CM hierarchy (edition in ``data/icd10cm_edition.txt``)."""
    return _packaged(CODE_SYSTEMS[ICD10].data_file)
