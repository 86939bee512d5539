"""Parsing and checking a data owner's ArtUC configuration: attributes, code sets and
utility constraints from the YAML's mapping, every key known, weights positive, and the
constraints consistent with one another (parts disjoint, bounds inside the domains). Errors
name the configuration's place, never a patient value; :mod:`.constraints` loads the file
and re-exports these.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ehr_release.configuration.rt_model import (
    ALL,
    CODE_FAMILIES,
    Attribute,
    CategoricalAttribute,
    CodeSet,
    Element,
    Interval,
    NumericalAttribute,
    RTConfig,
    UtilityConstraint,
    _label,
    hierarchy_from_tree,
)
from ehr_release.core.errors import ConfigError
from ehr_release.model.hierarchy import (
    CODE_SYSTEMS,
    Hierarchy,
)

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
