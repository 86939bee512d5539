"""Attribute configuration and utility constraints for (k, k^m)-anonymity (ArtUC, RmR, Baseline).

Why a module of its own: the anonymizer and the independent verifier must read the *same
input* — which demographic attributes are released, their hierarchies (categorical) and
domains (numerical), and the data owner's utility constraints — while sharing no logic. This
module only turns configuration into typed values and refuses bad configuration; what is
done with it lives on each side.

A configuration is a mapping (usually a YAML file)::

    attributes:
      age: {type: numerical, domain: [0, 120], weight: 0.5}
      gender: {type: categorical, hierarchy: {All: [F, M]}}      # or a child,parent CSV
    codes: {hierarchy: icd9}                     # the shipped ICD-9-CM (icd10: ICD-10-CM)
    constraints:
      - name: UC1
        age: {bands: 12, from: 0, to: 119}                         # [0, 11], [12, 23], ...
        gender: All
        codes: chapters                                            # one set per chapter
        code_weight: 0.5        # w(ũ) of Def. 5 for codes generalized inside these sets

A constraint template expands into the product of its multi-valued elements (bands, lists,
``{level: n}``, code families), as in the paper's UC1–UC9. The constraint set must be
*consistent* (per attribute, elements are equal or disjoint) and, for a dataset, *covering*
(every record's demographics lie in one constraint, every code in one code set); otherwise
:class:`~ehr_release.errors.ConfigError` names the offending constraints and values.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from ehr_release.configuration.limits import load_config_yaml, read_config_text
from ehr_release.dataset import Dataset
from ehr_release.errors import ConfigError, InputError, ParameterError
from ehr_release.hierarchy import (
    CODE_SYSTEMS,
    Hierarchy,
    code_hierarchy,
    code_system,
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


# --------------------------------------------------------------------------- parsing
HierarchyReader = Callable[[str], Hierarchy]


def parse_config(raw: Any, read_hierarchy: HierarchyReader, *, source: str = "") -> RTConfig:
    """Turn an already-loaded configuration mapping into a checked :class:`RTConfig`.

    ``read_hierarchy(ref)`` resolves a hierarchy given by reference (a file name or
    ``icd9``); parsing itself reads no files.

    Raises
    ------
    ConfigError
        Malformed entries, unknown attributes or nodes, weights that do not sum to 1, or an
        inconsistent constraint set.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source or 'configuration'}: must be a mapping")
    _known_keys(raw, _CONFIG_KEYS, source or "configuration")
    attrs_raw = raw.get("attributes")
    if not isinstance(attrs_raw, Mapping) or not attrs_raw:
        raise ConfigError(f"{source or 'configuration'}: 'attributes' must map each released "
                          "demographic to its type")
    attributes = _parse_attributes(attrs_raw, read_hierarchy)
    codes_cfg = raw.get("codes") or {}
    if isinstance(codes_cfg, Mapping):
        _known_keys(codes_cfg, _CODES_KEYS, "codes")
    code_ref = codes_cfg.get("hierarchy", "icd9") if isinstance(codes_cfg, Mapping) else "icd9"
    code_h: list[Hierarchy] = []

    def code_hierarchy() -> Hierarchy:
        if not code_h:
            code_h.append(read_hierarchy(str(code_ref)))
        return code_h[0]

    constraints = parse_constraints(raw.get("constraints") or [], attributes, code_hierarchy)
    config = RTConfig(attributes, tuple(constraints), source, str(code_ref).strip().lower()
                      if str(code_ref).strip().lower() in CODE_SYSTEMS else str(code_ref))
    check_consistent(config)
    return config


#: The keys a configuration may hold, at the top, per attribute and under ``codes``. A
#: misspelt key is refused: ignored, ``constraint:`` would release without the utility
#: constraints and ``wieght:`` would fall back to an equal weight, both silently.
_CONFIG_KEYS = frozenset({"defaults", "attributes", "codes", "constraints"})
_ATTRIBUTE_KEYS = frozenset({"type", "domain", "hierarchy", "weight"})
_CODES_KEYS = frozenset({"hierarchy"})


def _known_keys(raw: Mapping[Any, Any], known: frozenset[str], where: str) -> None:
    """Refuse the first key of ``raw`` not in ``known``, naming where it is."""
    unknown = sorted(str(k) for k in raw if str(k) not in known)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} "
                          f"(known: {', '.join(sorted(known))})")


def _parse_attributes(raw: Mapping[str, Any],
                      read_hierarchy: HierarchyReader) -> tuple[Attribute, ...]:
    out: list[Attribute] = []
    given = [spec.get("weight") for spec in raw.values() if isinstance(spec, Mapping)]
    for name, spec in raw.items():
        where = f"attribute {name!r}"
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{where}: must be a mapping with a 'type'")
        _known_keys(spec, _ATTRIBUTE_KEYS, where)
        weight = spec.get("weight", 1.0 / len(raw) if all(g is None for g in given) else None)
        if not isinstance(weight, int | float) or isinstance(weight, bool) or weight < 0:
            raise ConfigError(f"{where}: 'weight' must be a number ≥ 0 (give every attribute "
                              "a weight, or none)")
        kind = spec.get("type")
        if kind == "numerical":
            domain = _interval(spec.get("domain"), f"{where} domain")
            if domain.high <= domain.low:
                raise ConfigError(f"{where}: the domain {domain} must have low < high")
            out.append(NumericalAttribute(str(name), domain, float(weight)))
        elif kind == "categorical":
            ref = spec.get("hierarchy")
            if ref is None:
                raise ConfigError(f"{where}: a categorical attribute needs a 'hierarchy'")
            h = (read_hierarchy(ref) if isinstance(ref, str)
                 else hierarchy_from_tree(ref, f"{where} hierarchy"))
            out.append(CategoricalAttribute(str(name), h, float(weight)))
        else:
            raise ConfigError(f"{where}: 'type' must be numerical or categorical; got {kind!r}")
    _check_weights([a.weight for a in out], [a.name for a in out], "configured weights")
    return tuple(out)


def _check_weights(weights: Sequence[float], names: Sequence[str], what: str) -> None:
    if not math.isclose(sum(weights), 1.0, abs_tol=1e-6):
        listing = ", ".join(f"{n}={w:g}" for n, w in zip(names, weights, strict=True))
        raise ConfigError(f"{what} must sum to 1; got {listing} (sum {sum(weights):g})")


def _interval(raw: Any, where: str) -> Interval:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return Interval(float(raw), float(raw))
    if (isinstance(raw, list) and len(raw) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw)):
        low, high = float(raw[0]), float(raw[1])
        if low > high:
            raise ConfigError(f"{where}: range [{raw[0]}, {raw[1]}] has low > high")
        return Interval(low, high)
    raise ConfigError(f"{where}: a range must be [low, high] or a single number; got {raw!r}")


def parse_constraints(raw: Any, attributes: Sequence[Attribute],
                      code_hierarchy: Callable[[], Hierarchy]) -> list[UtilityConstraint]:
    """Expand constraint templates into constraints (product of multi-valued elements)."""
    if not isinstance(raw, list):
        raise ConfigError("'constraints' must be a list of constraint templates")
    known = {a.name for a in attributes} | {"name", "codes", "code_weight"}
    out: list[UtilityConstraint] = []
    families: dict[str, list[CodeSet]] = {}
    for i, tpl in enumerate(raw, start=1):
        if not isinstance(tpl, Mapping):
            raise ConfigError(f"constraint #{i}: must be a mapping")
        name = str(tpl.get("name", f"u{i}"))
        unknown = sorted(set(map(str, tpl)) - known)
        if unknown:
            raise ConfigError(f"constraint {name}: {unknown[0]!r} is not a configured attribute "
                              f"(attributes: {', '.join(a.name for a in attributes)})")
        options = [_element_options(a, tpl.get(a.name), name) for a in attributes]
        code_sets = _code_options(tpl.get("codes"), name, code_hierarchy, families)
        if "code_weight" in tpl:
            weight = _code_weight(tpl["code_weight"], f"constraint {name}, code_weight")
            code_sets = [replace(cs, weight=weight) for cs in code_sets]
        multi = [a.name for a, o in zip(attributes, options, strict=True) if len(o) > 1]
        for combo in itertools.product(*options, code_sets):
            *demo, codes = combo
            label = name
            if multi or len(code_sets) > 1:
                parts = [f"{a.name}={v}" for a, v in zip(attributes, demo, strict=True)
                         if a.name in multi]
                if len(code_sets) > 1:
                    parts.append(f"codes={codes.label}")
                label = f"{name}[{', '.join(parts)}]"
            out.append(UtilityConstraint(label, tuple(demo), codes))
    return out


def _code_weight(raw: Any, where: str) -> float:
    if not isinstance(raw, int | float) or isinstance(raw, bool) or not 0 <= raw <= 1:
        raise ConfigError(f"{where}: must be a number in [0, 1] (w(ũ) of Def. 5); got {raw!r}")
    return float(raw)


def _element_options(attr: Attribute, raw: Any, name: str) -> list[Element]:
    where = f"constraint {name}, {attr.name}"
    if isinstance(attr, NumericalAttribute):
        if raw is None or raw == "All":
            return [attr.domain]
        if isinstance(raw, Mapping):
            return _bands(raw, where)
        if isinstance(raw, list) and raw and all(isinstance(x, list) for x in raw):
            return [_interval(x, where) for x in raw]
        return [_interval(raw, where)]
    h = attr.hierarchy
    if raw is None:
        return [h.root]
    if isinstance(raw, Mapping) and set(raw) == {"level"}:
        nodes = sorted(n for n, lv in h.level.items() if lv == raw["level"])
        if not nodes:
            raise ConfigError(f"{where}: the hierarchy has no nodes at level {raw['level']!r}")
        return nodes
    values = raw if isinstance(raw, list) else [raw]
    out = []
    for v in values:
        node = _label(v)
        if node not in h:
            raise ConfigError(f"{where}: {node!r} is not a node of the attribute's hierarchy")
        out.append(node)
    return out


def _bands(raw: Mapping[str, Any], where: str) -> list[Element]:
    try:
        width, low, high = (raw[key] for key in ("bands", "from", "to"))
    except KeyError:
        raise ConfigError(f"{where}: bands need 'bands' (width), 'from' and 'to'") from None
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (width, low, high)) \
            or width < 1 or high < low:
        raise ConfigError(f"{where}: bands need integers width ≥ 1 and from ≤ to; got {raw!r}")
    return [Interval(float(a), float(min(a + width - 1, high)))
            for a in range(low, high + 1, width)]


def _code_options(raw: Any, name: str, code_hierarchy: Callable[[], Hierarchy],
                  families: dict[str, list[CodeSet]]) -> list[CodeSet]:
    where = f"constraint {name}, codes"
    if isinstance(raw, str):
        key = raw.strip().lower()
        if key not in families:
            families[key] = _family(key, code_hierarchy, where)
        return families[key]
    if isinstance(raw, list) and raw:
        codes: set[str] = set()
        for item in raw:
            if not isinstance(item, str):
                raise ConfigError(f"{where}: code {item!r} is not text — quote ICD-9 codes in "
                                  "YAML (053.20 would be read as the number 53.2)")
            code = item.strip()
            if code.endswith(".*"):
                codes.update(_subtree(code_hierarchy(), code[:-2], where))
            else:
                codes.add(code)
        return [CodeSet(f"{name} codes", frozenset(codes))]
    raise ConfigError(f"{where}: must be a list of codes ('053.*' = a node and its subtree) or "
                      f"one of {', '.join([*CODE_FAMILIES, ALL])}; got {raw!r}")


def _family(key: str, code_hierarchy: Callable[[], Hierarchy], where: str) -> list[CodeSet]:
    h = code_hierarchy()
    if key == ALL:
        return [CodeSet("all codes", frozenset(h.parent) | {h.root})]
    if key not in CODE_FAMILIES:
        raise ConfigError(f"{where}: unknown code family {key!r} (known: "
                          f"{', '.join([*CODE_FAMILIES, ALL])})")
    level = CODE_FAMILIES[key]
    members: dict[str, set[str]] = {}
    for node, lv in h.level.items():
        if lv >= level:
            members.setdefault(h.ancestor_at_level(node, level), set()).add(node)
    return [CodeSet(top, frozenset(codes)) for top, codes in sorted(members.items())]


def _subtree(h: Hierarchy, node: str, where: str) -> set[str]:
    if node not in h:
        raise ConfigError(f"{where}: {node!r} is not a node of the code hierarchy")
    out, stack = set(), [node]
    while stack:
        n = stack.pop()
        out.add(n)
        stack.extend(h.children.get(n, ()))
    return out


# --------------------------------------------------------------------------- consistency
def check_consistent(config: RTConfig) -> None:
    """Demographic parts pairwise equal or disjoint; code sets pairwise equal or disjoint.

    Decision: the paper states the rule per attribute, but its own Table 4 pairs ``All``
    (u1) with ``Africa`` (u4) — the constraints are kept apart by age alone. What the rule
    protects (no record may fall under two different generalization limits) holds when any
    two distinct demographic parts are disjoint in at least one attribute, so that is the
    rule applied: two parts that overlap in every attribute must be identical.
    """
    parts = config.demographic_parts()
    if len(parts) > 1:
        _check_parts(config, parts)
    owner: dict[str, CodeSet] = {}
    names = {u.codes: u.name for u in reversed(config.constraints)}
    weighed: dict[frozenset[str], CodeSet] = {}
    for u in config.constraints:
        first = weighed.setdefault(u.codes.codes, u.codes)
        if first.weight != u.codes.weight:
            raise ConfigError(
                f"utility constraints {names[first]} and {u.name} give their code set "
                f"({first.label}) the weights {first.weight:g} and {u.codes.weight:g}; a code "
                "set has one weight")
    for cs in config.code_sets():
        for code in cs.codes:
            other = owner.setdefault(code, cs)
            if other is not cs:
                raise ConfigError(
                    f"utility constraints {names[other]} and {names[cs]} are inconsistent on "
                    f"codes: their code sets ({other.label}, {cs.label}) share {code} but are "
                    "not equal")


def _check_parts(config: RTConfig, parts: list[tuple[Element, ...]]) -> None:
    bounds = [_bounds(a, [p[i] for p in parts]) for i, a in enumerate(config.attributes)]
    for start in range(0, len(parts), 512):  # blocks keep the pairwise tables small
        rows = slice(start, start + 512)
        overlap = np.ones((len(parts[rows]), len(parts)), dtype=bool)
        for low, high in bounds:
            overlap &= (low[rows, None] <= high[None, :]) & (low[None, :] <= high[rows, None])
        overlap[np.arange(len(parts[rows])), np.arange(start, start + len(parts[rows]))] = False
        if overlap.any():
            a, b = np.argwhere(overlap)[0]
            first, second = parts[start + int(a)], parts[int(b)]
            names = {u.demographics: u.name for u in reversed(config.constraints)}
            diff = "; ".join(f"{attr.name} {_show_element(x)} vs {_show_element(y)}"
                             for attr, x, y in zip(config.attributes, first, second, strict=True)
                             if x != y)
            raise ConfigError(
                f"utility constraints {names[first]} and {names[second]} are inconsistent: "
                f"their demographics overlap without being equal ({diff}); make them equal or "
                "disjoint in some attribute")


def _bounds(attr: Attribute, elements: list[Element]) -> tuple[np.ndarray, np.ndarray]:
    """Elements as closed numeric intervals; a node as the span of its leaves (DFS order),
    so two nodes overlap exactly when one contains the other."""
    if isinstance(attr, NumericalAttribute):
        return (np.array([e.low for e in elements], dtype=float),
                np.array([e.high for e in elements], dtype=float))
    h = attr.hierarchy
    position = {leaf: i for i, leaf in enumerate(h.leaves_under(h.root))}
    spans = [[position[x] for x in (h.leaves_under(e)[0], h.leaves_under(e)[-1])]
             for e in elements]
    arr = np.array(spans, dtype=float)
    return arr[:, 0], arr[:, 1]


def _show_element(e: Element) -> str:
    return str(e) if isinstance(e, Interval) else repr(e)


# --------------------------------------------------------------------------- data under config
def rt_data(dataset: Dataset, config: RTConfig) -> RTData:
    """The dataset's configured demographics (validated) and code sets.

    Raises
    ------
    ConfigError
        A configured attribute is not a column of the dataset.
    InputError
        A value is missing, outside a numerical domain, or not a node of its hierarchy.
    """
    if config.codes_ref in CODE_SYSTEMS and config.codes_ref != dataset.code_system:
        named, coded = (code_system(s).label for s in (config.codes_ref, dataset.code_system))
        raise ConfigError(f"the configuration's code hierarchy is {named} (codes: "
                          f"{{hierarchy: {config.codes_ref}}}) but the extract is coded in "
                          f"{coded}: set codes: {{hierarchy: {dataset.code_system}}}")
    missing = [n for n in config.names if n not in dataset.patients.columns]
    if missing:
        raise ConfigError(f"configured attribute {missing[0]!r} is not a column of the data "
                          f"(columns: {', '.join(map(str, dataset.demographic_columns))})")
    where = dataset.source or "dataset"  # every input error names its file
    frame = pd.DataFrame(index=dataset.patients.index)
    for attr in config.attributes:
        col = dataset.patients[attr.name]
        if isinstance(attr, NumericalAttribute):
            values = pd.to_numeric(col, errors="coerce").astype("float64")
            bad = values.isna() | (values < attr.domain.low) | (values > attr.domain.high)
            if bad.any():
                row = int(bad.to_numpy().argmax()) + 1
                raise InputError(f"value is missing or outside the configured domain "
                                 f"{attr.domain}", file=where, row=row, column=attr.name,
                                 detail=f"found {str(col.iloc[row - 1])!r}")
            frame[attr.name] = values
        else:
            values = col.astype("string").fillna("")
            unknown = ~values.isin(list(attr.hierarchy.level))
            if unknown.any():
                row = int(unknown.to_numpy().argmax()) + 1
                raise InputError("value is not a node of the configured hierarchy",
                                 file=where, row=row, column=attr.name,
                                 detail=f"found {str(values.iloc[row - 1])!r}")
            frame[attr.name] = values.astype(object)
    return RTData(list(dataset.patient_ids), frame, list(dataset.code_sets()))


def assign_parts(data: RTData, config: RTConfig) -> np.ndarray:
    """Index (into :meth:`RTConfig.demographic_parts`) of the part holding each record.

    Raises
    ------
    ConfigError
        A record's demographics lie in no single constraint (names the patient, its values
        and which attributes no constraint covers).
    """
    parts = config.demographic_parts()
    out = np.full(len(data.patient_ids), -1, dtype=np.int64)
    for p, part in enumerate(parts):
        mask = np.ones(len(out), dtype=bool)
        for attr, element in zip(config.attributes, part, strict=True):
            mask &= _inside(data.demographics[attr.name], attr, element)
        out[mask & (out < 0)] = p
    if (out < 0).any():
        row = int(np.flatnonzero(out < 0)[0])
        values = {a.name: data.demographics[a.name].iloc[row] for a in config.attributes}
        alone = [a.name for i, a in enumerate(config.attributes)
                 if not any(_inside(pd.Series([values[a.name]]), a, part[i]).iloc[0]
                            for part in parts)]
        shown = ", ".join(f"{n}={_show(v)}" for n, v in values.items())
        why = (f"no constraint covers {', '.join(alone)}" if alone
               else "each value is covered, but no single constraint combines them")
        raise ConfigError(f"utility constraints do not cover the patient in row {row + 1}: "
                          f"{why}", detail=shown)
    return out


def _inside(values: pd.Series, attr: Attribute, element: Element) -> pd.Series:
    if isinstance(attr, NumericalAttribute):
        assert isinstance(element, Interval)
        return (values >= element.low) & (values <= element.high)
    h = attr.hierarchy
    under = {v for v in values.unique() if v == element or element in h.ancestors(v)}
    return values.isin(under)


def _show(value: Any) -> str:
    return _num(value) if isinstance(value, int | float) else repr(value)


def code_set_index(config: RTConfig, codes: Iterable[str]) -> dict[str, int]:
    """Map each code to the index of its code set (in :meth:`RTConfig.code_sets`).

    Raises
    ------
    ConfigError
        Some codes fall in no constraint's code set (its terminal-only detail names up to
        five of them; the stored message none).
    """
    owner: dict[str, int] = {}
    for i, cs in enumerate(config.code_sets()):
        for code in cs.codes:
            owner[code] = i
    uncovered = sorted({c for c in codes if c not in owner})
    if uncovered:
        more = f" (+{len(uncovered) - 5} more)" if len(uncovered) > 5 else ""
        # The codes are the extract's (a rare one may be one patient's): terminal only.
        raise ConfigError("utility constraints do not cover some codes of the data: add "
                          "them to a constraint's code set (or use codes: all)",
                          detail=f"{', '.join(uncovered[:5])}{more}")
    return {c: owner[c] for c in codes}


# --------------------------------------------------------------------------- weights
def _named_weights(text: str, parameter: str, allowed: Callable[[float], bool],
                   rule: str) -> dict[str, float]:
    """``"a=0.5,b=0.5"`` → {"a": 0.5, "b": 0.5}; a malformed item, a weight ``allowed``
    refuses or a name given twice is a :class:`ParameterError` for ``parameter``."""
    given: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = math.nan
        if not sep or not allowed(weight) or name.strip() in given:
            raise ParameterError(parameter, rule, text)
        given[name.strip()] = weight
    return given


def with_weights(config: RTConfig, text: str) -> RTConfig:
    """Override attribute weights from ``"age=0.5,gender=0.5"`` (empty text: keep them).

    Raises
    ------
    ParameterError
        Unknown or missing attributes, malformed numbers, or a sum other than 1.
    """
    if not text.strip():
        return config
    given = _named_weights(text, "weights", lambda w: w >= 0,
                           "must look like NAME=WEIGHT,... with weights ≥ 0")
    if set(given) != set(config.names):
        raise ParameterError("weights", f"must give a weight to each attribute "
                             f"({', '.join(config.names)}) and no other", text)
    try:
        _check_weights([given[n] for n in config.names], config.names, "weights")
    except ConfigError as exc:
        raise ParameterError("weights", str(exc), text) from None
    attrs = tuple(replace(a, weight=given[a.name]) for a in config.attributes)
    return replace(config, attributes=attrs)


def with_code_weights(config: RTConfig, text: str) -> RTConfig:
    """Override code-set weights w(ũ) from ``"UC1=0.5,u4=1"`` (empty text: keep them).

    A name is a constraint's name as written in the configuration (a template's name
    covers every constraint it expands into); its code sets get the weight.

    Raises
    ------
    ParameterError
        Unknown names, weights outside [0, 1], or one code set given two weights.
    """
    if not text.strip():
        return config
    given = _named_weights(text, "code_weights", lambda w: 0 <= w <= 1,
                           "must look like CONSTRAINT=WEIGHT,... with weights in [0, 1]")
    template = {u.name: u.name.split("[", 1)[0] for u in config.constraints}
    unknown = sorted(set(given) - set(template) - set(template.values()))
    if unknown:
        raise ParameterError("code_weights", f"names no constraint of the configuration "
                             f"({unknown[0]!r})", text)
    out = []
    for u in config.constraints:
        weight = given.get(u.name, given.get(template[u.name]))
        out.append(u if weight is None else replace(u, codes=replace(u.codes, weight=weight)))
    weighted = replace(config, constraints=tuple(out))
    try:
        check_consistent(weighted)
    except ConfigError as exc:
        raise ParameterError("code_weights", str(exc), text) from None
    return weighted


# --------------------------------------------------------------------------- files
def read_hierarchy_file(ref: str, base: Path) -> Hierarchy:
    """``icd9`` / ``icd10`` (the shipped ICD-9-CM / ICD-10-CM) or a ``child,parent`` CSV /
    YAML tree file."""
    if ref.strip().lower() in CODE_SYSTEMS:
        return code_hierarchy(ref.strip().lower())
    path = (base / ref).resolve()
    if not path.is_file():
        raise ConfigError(f"hierarchy file {path} does not exist")
    if path.suffix.lower() in {".yaml", ".yml"}:
        return hierarchy_from_tree(_read_yaml(path), str(path))
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        # fix (issue 8 fuzzing): binary, empty or untokenizable CSV is a ConfigError
        raise ConfigError(f"hierarchy file {path} is not a child,parent CSV: {exc}") from None
    return hierarchy_from_pairs(frame, str(path))


def _read_yaml(path: Path) -> Any:
    try:
        return load_config_yaml(read_config_text(path), str(path))  # size, depth: one line
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:  # fix (issue 8): + binary
        raise ConfigError(f"cannot read {path}: {exc}") from None


def load_config(path: str | Path, constraints: str | Path | None = None) -> RTConfig:
    """Read a configuration file; ``constraints`` (a YAML file with a ``constraints:`` list)
    replaces the file's own constraints. Hierarchy files are relative to the configuration."""
    cfg_path = Path(path).resolve()
    if not cfg_path.is_file():
        raise ConfigError(f"configuration file {cfg_path} does not exist")
    raw = _read_yaml(cfg_path)
    if constraints:
        extra = _read_yaml(Path(constraints).resolve())
        if not isinstance(extra, Mapping) or "constraints" not in extra:
            raise ConfigError(f"{constraints}: must be a mapping with a 'constraints' list")
        raw = {**(raw if isinstance(raw, Mapping) else {}), "constraints": extra["constraints"]}
    return parse_config(raw, lambda ref: read_hierarchy_file(ref, cfg_path.parent),
                        source=str(cfg_path))


def config_from_params(params: Mapping[str, Any]) -> RTConfig:
    """The configuration a (k, k^m) release's parameters name: ``config``, its
    ``constraints`` replaced by those of the ``constraints`` file when given, and the
    ``weights`` and ``code_weights`` overrides applied — what the anonymizer and the verifier
    both judge against."""
    extra = params.get("constraints") or ""
    config = load_config(str(Path(params["config"]).resolve()),
                         str(Path(extra).resolve()) if extra else None)
    config = with_weights(config, params.get("weights") or "")
    return with_code_weights(config, params.get("code_weights") or "")
