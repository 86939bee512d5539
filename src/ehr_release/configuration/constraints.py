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
:class:`~ehr_release.core.errors.ConfigError` names the offending constraints and values.

The value types live in :mod:`.rt_model` and the parsing and consistency checks in
:mod:`.rt_parse` (both re-exported here, where every caller imports them); this module
reads the files and the run's parameters and places the data under a configuration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from ehr_release.configuration.limits import load_config_yaml, read_config_text
from ehr_release.configuration.rt_model import (  # noqa: F401
    ALL,
    CODE_FAMILIES,
    Attribute,
    CategoricalAttribute,
    CodeSet,
    Element,
    Interval,
    NumericalAttribute,
    RTConfig,
    RTData,
    UtilityConstraint,
    _label,
    _num,
    hierarchy_from_pairs,
    hierarchy_from_tree,
)
from ehr_release.configuration.rt_parse import (  # noqa: F401
    _check_weights,
    check_consistent,
    parse_config,
    parse_constraints,
)
from ehr_release.core.errors import ConfigError, InputError, ParameterError
from ehr_release.model.dataset import Dataset
from ehr_release.model.hierarchy import (
    CODE_SYSTEMS,
    Hierarchy,
    code_hierarchy,
    code_system,
)


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
