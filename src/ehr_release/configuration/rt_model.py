"""What an ArtUC configuration is made of: attributes (numerical ranges, categorical
hierarchies), code sets, utility constraints, the whole ``RTConfig`` and the data read
under it (``RTData``), and hierarchies built from a YAML tree or a table. Plain frozen
values, read by the anonymizers, the verifiers and the evaluations alike;
:mod:`.constraints` re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ehr_release.core.errors import ConfigError
from ehr_release.model.hierarchy import (
    Hierarchy,
    hierarchy_from_frame,
)

#: Code-set families: every node at this level of the code hierarchy (with its subtree).
CODE_FAMILIES = {"chapters": 1, "sections": 2, "3-digit": 3}


ALL = "all"


# --------------------------------------------------------------------------- value types
@dataclass(frozen=True)
class Interval:
    """A closed range ``[low, high]`` of a numerical attribute."""

    low: float
    high: float

    def covers(self, other: Interval) -> bool:
        return self.low <= other.low and other.high <= self.high

    def __str__(self) -> str:
        return f"[{_num(self.low)}, {_num(self.high)}]"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


@dataclass(frozen=True)
class NumericalAttribute:
    """A numerical demographic; NCP divides a range's length by the configured domain's."""

    name: str
    domain: Interval
    weight: float

    @property
    def span(self) -> float:
        return self.domain.high - self.domain.low


@dataclass(frozen=True)
class CategoricalAttribute:
    """A categorical demographic generalized along the owner's hierarchy."""

    name: str
    hierarchy: Hierarchy
    weight: float


Attribute = NumericalAttribute | CategoricalAttribute


Element = Interval | str


@dataclass(frozen=True, eq=False)
class CodeSet:
    """The code part of a utility constraint; compared by identity, deduplicated by content.

    ``weight`` is w(ũ) of Def. 5 (UL(ũ) = (2^|ũ| − 1)·w(ũ)) for every generalized code ũ
    inside this set: "the importance of the diagnosis codes replaced by ũ", given by the
    data owner. Weights are per code set because ArtUC generalizes codes only inside one
    set, so w(ũ) is then well defined; a ũ spanning sets (RmR) takes its largest weight.
    """

    label: str
    codes: frozenset[str]
    weight: float = 1.0


@dataclass(frozen=True)
class UtilityConstraint:
    """u = (v_A1..v_Al, v_codes): the least preferred generalization a record may get."""

    name: str
    demographics: tuple[Element, ...]
    codes: CodeSet


@dataclass(frozen=True)
class RTConfig:
    """Released attributes (in release order), code hierarchy and the utility constraints."""

    attributes: tuple[Attribute, ...]
    constraints: tuple[UtilityConstraint, ...]
    source: str = ""
    #: What ``codes: {hierarchy: …}`` names: a packaged code system (``icd9``, ``icd10``)
    #: the extract must be coded in, or a file (a site's own tree).
    codes_ref: str = "icd9"

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.attributes]

    def demographic_parts(self) -> list[tuple[Element, ...]]:
        """Distinct demographic parts of the constraints, in order of first appearance."""
        return list(dict.fromkeys(u.demographics for u in self.constraints))

    def code_sets(self) -> list[CodeSet]:
        """Distinct code sets (by content), in order of first appearance."""
        seen: dict[frozenset[str], CodeSet] = {}
        for u in self.constraints:
            seen.setdefault(u.codes.codes, u.codes)
        return list(seen.values())

    def code_weights(self) -> dict[str, float]:
        """Weight w of each code whose code set is weighted other than 1 (empty: all 1)."""
        return {c: cs.weight for cs in self.code_sets() if cs.weight != 1.0 for c in cs.codes}


@dataclass(frozen=True)
class RTData:
    """A dataset as an RT-dataset under a configuration: demographics + code sets."""

    patient_ids: list[str]
    demographics: pd.DataFrame
    codes: list[frozenset[str]]


# --------------------------------------------------------------------------- hierarchies
def hierarchy_from_tree(tree: Any, where: str) -> Hierarchy:
    """Build a hierarchy from a YAML tree ``{Root: {Child: [leaf, ...], ...}}``."""
    if not isinstance(tree, Mapping) or len(tree) != 1:
        raise ConfigError(f"{where}: a hierarchy tree must be a mapping with exactly one root")
    (root, below), = tree.items()
    root = _label(root)
    parent: dict[str, str] = {}
    level: dict[str, int] = {root: 0}

    def add(node: str, up: str) -> None:
        if node in level:
            raise ConfigError(f"{where}: hierarchy node {node!r} appears more than once")
        parent[node] = up
        level[node] = level[up] + 1

    def walk(up: str, sub: Any) -> None:
        if sub is None:
            return
        if isinstance(sub, Mapping):
            for child, grand in sub.items():
                add(_label(child), up)
                walk(_label(child), grand)
        elif isinstance(sub, list):
            for item in sub:
                if isinstance(item, Mapping):
                    walk(up, item)
                else:
                    add(_label(item), up)
        else:
            add(_label(sub), up)

    walk(root, below)
    return Hierarchy(parent=parent, level=level, root=root)


def hierarchy_from_pairs(frame: pd.DataFrame, where: str) -> Hierarchy:
    """Build a hierarchy from a ``child,parent`` table (one parentless root)."""
    if not {"child", "parent"} <= set(frame.columns):
        raise ConfigError(f"{where}: a hierarchy CSV needs the columns child,parent")
    dup = frame["child"][frame["child"].duplicated()]
    if len(dup):
        raise ConfigError(f"{where}: node {dup.iloc[0]!r} has more than one parent")
    try:
        return hierarchy_from_frame(frame.rename(columns={"child": "code"}))
    except (ValueError, KeyError, RecursionError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _label(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        raise ConfigError(f"hierarchy label {value!r} is not text: quote it in the YAML")
    return str(value)
