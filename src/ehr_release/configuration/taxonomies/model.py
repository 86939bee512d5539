"""Typed pieces of a public release configuration, built from YAML.

Taxonomies are :class:`~ehr_release.model.hierarchy.Hierarchy` trees so that categorical and
set-valued attributes share one tree type with the ICD-9 hierarchy. The set-valued taxonomy
is *derived* from a public tree by two data-independent steps -- truncation at a depth and
regrouping to a bounded fan-out -- so that what the anonymizer searches is still fixed before
any record is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ehr_release.core.errors import ConfigError
from ehr_release.model.hierarchy import CODE_SYSTEMS, Hierarchy, code_hierarchy

#: Separator of the first and last child in the name of a regrouping node ("001-139..240-279").
GROUP_SEPARATOR = ".."


@dataclass(frozen=True)
class NumericalDomain:
    """A public half-open interval ``[lo, hi)``; over integers when ``integer`` is true.

    An interval can be split when it holds at least two possible values: the split point
    ``s`` then gives ``[lo, s)`` and ``[s, hi)``, both non-empty as sets of possible values.
    """

    lo: float
    hi: float
    integer: bool = True

    def splittable(self, lo: float, hi: float) -> bool:
        return hi - lo >= 2 if self.integer else hi > lo

    def as_dict(self) -> dict[str, Any]:
        return {"domain": [_plain(self.lo), _plain(self.hi)], "integer": self.integer}


def _plain(x: float) -> float | int:
    return int(x) if float(x).is_integer() else float(x)


@dataclass(frozen=True, eq=False)
class SetValuedTaxonomy:
    """The tree a set-valued attribute (diagnosis codes) is generalized in.

    ``item_of`` maps an input code to the leaf of ``tree`` it counts as (its ancestor at
    ``depth`` for ICD-9); a code above that depth has no leaf and is refused by the encoder.
    """

    tree: Hierarchy
    source: str
    depth: int | None
    max_fanout: int | None
    base: Hierarchy = field(repr=False)

    def item_of(self, code: str) -> str | None:
        """The leaf of :attr:`tree` that ``code`` generalizes to, or None if it has none."""
        if code not in self.base or code == self.base.root:
            return None
        node = code if self.depth is None else self.base.ancestor_at_level(code, self.depth)
        return node if node in self.tree and self.tree.is_leaf(node) else None

    def as_dict(self) -> dict[str, Any]:
        return {"taxonomy": self.source, "depth": self.depth, "max_fanout": self.max_fanout}


@dataclass(frozen=True, eq=False)
class DiffGenConfig:
    """A checked configuration: which attributes are predictors and their public domains."""

    source: str
    class_column: str
    class_values: tuple[str, ...]
    categorical: dict[str, Hierarchy]
    numerical: dict[str, NumericalDomain]
    set_valued: dict[str, SetValuedTaxonomy]

    @property
    def predictors(self) -> list[str]:
        return [*self.categorical, *self.numerical, *self.set_valued]


# --------------------------------------------------------------------------- parsing
def _name(value: Any, where: str) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, float):
        raise ConfigError(f"{where}: node name {value!r} must be written as a quoted string")
    return str(value)


def parse_tree(tree: Any, where: str) -> Hierarchy:
    """A taxonomy from nested YAML: ``{root: {child: [leaf, ...], leaf2: null}}``.

    Lists hold leaves (or one-key mappings for subtrees); mappings map a node to its
    children; ``null`` marks a leaf. Node names must be unique within the tree.
    """
    if not isinstance(tree, dict) or len(tree) != 1:
        raise ConfigError(f"{where}: a taxonomy must be a mapping with exactly one root")
    parent: dict[str, str] = {}
    level: dict[str, int] = {}
    (root_raw, body), = tree.items()
    root = _name(root_raw, where)
    level[root] = 0

    def add(node: str, par: str | None, body: Any) -> None:
        if node in level and par is not None:
            raise ConfigError(f"{where}: node {node!r} appears twice")
        if par is not None:
            parent[node] = par
            level[node] = level[par] + 1
        if body is None:
            return
        items: list[tuple[Any, Any]]
        if isinstance(body, dict):
            items = list(body.items())
        elif isinstance(body, list):
            items = []
            for entry in body:
                if isinstance(entry, dict):
                    items.extend(entry.items())
                else:
                    items.append((entry, None))
        else:
            raise ConfigError(f"{where}: children of {node!r} must be a list or mapping, "
                              f"got {body!r}")
        if not items:
            raise ConfigError(f"{where}: node {node!r} has an empty list of children")
        for child, sub in items:
            add(_name(child, where), node, sub)

    add(root, None, body)
    return Hierarchy(parent=parent, level=level, root=root)


def parse_domains(section: Any, where: str) -> dict[str, NumericalDomain]:
    """``{attr: {domain: [lo, hi], integer: bool}}`` → checked :class:`NumericalDomain` s."""
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: numerical must map attributes to domains")
    out: dict[str, NumericalDomain] = {}
    for name, spec in section.items():
        bounds = spec.get("domain") if isinstance(spec, dict) else None
        if (not isinstance(bounds, list) or len(bounds) != 2
                or any(isinstance(b, bool) or not isinstance(b, int | float) for b in bounds)):
            raise ConfigError(f"{where}: {name!r} needs domain: [lo, hi] with numbers")
        lo, hi = float(bounds[0]), float(bounds[1])
        integer = bool(spec.get("integer", True))
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
            raise ConfigError(f"{where}: {name!r} domain [{lo}, {hi}) is empty or infinite")
        if integer and not (lo.is_integer() and hi.is_integer()):
            raise ConfigError(f"{where}: {name!r} is an integer domain with non-integer bounds")
        out[str(name)] = NumericalDomain(lo, hi, integer)
    return out


def set_valued_taxonomy(spec: Any, where: str) -> SetValuedTaxonomy:
    """The tree of a set-valued attribute: ``icd9``, ``icd10`` or an inline tree, truncated,
    regrouped."""
    if not isinstance(spec, dict) or "taxonomy" not in spec:
        raise ConfigError(f"{where}: needs taxonomy: icd9, icd10 or an inline tree")
    depth = spec.get("depth")
    fanout = spec.get("max_fanout")
    for key, value in (("depth", depth), ("max_fanout", fanout)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < (1 if key == "depth" else 2)):
            raise ConfigError(f"{where}: {key} must be an integer ≥ "
                              f"{1 if key == 'depth' else 2}, got {value!r}")
    source = spec["taxonomy"]
    if isinstance(source, str) and source in CODE_SYSTEMS:
        base = code_hierarchy(source)
    elif isinstance(source, dict):
        base = parse_tree(source, where)
        source = "inline"
    else:
        raise ConfigError(f"{where}: taxonomy must be icd9, icd10 or an inline tree, "
                          f"got {source!r}")
    tree = truncate(base, depth)
    if fanout is not None:
        tree = regroup(tree, fanout)
    return SetValuedTaxonomy(tree=tree, source=str(source), depth=depth, max_fanout=fanout,
                             base=base)


def truncate(tree: Hierarchy, depth: int | None) -> Hierarchy:
    """The nodes of ``tree`` at level ≤ ``depth`` (all of it when ``depth`` is None)."""
    if depth is None:
        return tree
    parent = {n: p for n, p in tree.parent.items() if tree.level[n] <= depth}
    level = {n: lv for n, lv in tree.level.items() if lv <= depth}
    return Hierarchy(parent=parent, level=level, title=tree.title, root=tree.root)


def regroup(tree: Hierarchy, max_fanout: int) -> Hierarchy:
    """Insert grouping nodes so that no node has more than ``max_fanout`` children.

    A node with k > f children gets f groups of consecutive children (sizes differing by at
    most one, children in sorted order); a group of one is the child itself, a larger group
    is a new node named ``first..last`` and is regrouped in turn. Deterministic and
    independent of any data, so the result is as public as the input tree. The leaves, and
    the ancestors a leaf had, are unchanged.
    """
    parent: dict[str, str] = {}
    kids_of = tree.children

    def place(node: str, children: list[str]) -> None:
        if len(children) <= max_fanout:
            for child in children:
                parent[child] = node
            return
        size, extra = divmod(len(children), max_fanout)
        start = 0
        for g in range(max_fanout):
            chunk = children[start:start + size + (1 if g < extra else 0)]
            start += len(chunk)
            if len(chunk) == 1:
                parent[chunk[0]] = node
                continue
            group = f"{chunk[0]}{GROUP_SEPARATOR}{chunk[-1]}"
            if group in tree:
                raise ConfigError(f"regrouping node {group!r} collides with a taxonomy node")
            parent[group] = node
            place(group, chunk)

    for node, children in kids_of.items():
        place(node, list(children))
    level: dict[str, int] = {tree.root: 0}

    def depth_of(n: str) -> int:
        if n not in level:
            level[n] = depth_of(parent[n]) + 1
        return level[n]

    for n in parent:
        depth_of(n)
    return Hierarchy(parent=parent, level=level, title=tree.title, root=tree.root)
