"""Public release configurations: taxonomies, numerical domains and class values.

DiffGen (and any generalization-based differentially private release) is only private if
the space of possible outputs is fixed before the data is looked at: a category that
appears in the output because it appears in the data, or an interval bound taken from the
data's minimum, leaks the presence of a record. This package therefore holds the *public*
side of a release -- shipped YAML files (``adult``, ``mimic-demo``) or a user's YAML --
and turns it into typed objects. It is configuration, like :mod:`ehr_release.model.hierarchy`, so
the anonymizer and its independent verifier both read it; neither derives it from records.

A configuration file has four sections::

    class:       {column: income, values: ["<=50K", ">50K"]}
    numerical:   {age: {domain: [17, 91], integer: true}}          # half-open [lo, hi)
    categorical: {sex: {Any-sex: [Male, Female]}}                    # one root per tree
    set_valued:  {codes: {taxonomy: icd9, depth: 3, max_fanout: 4}}  # or an inline tree
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path, PurePath
from typing import Any

import yaml

from ehr_release.configuration.limits import load_config_yaml, read_config_text
from ehr_release.configuration.taxonomies.model import (
    DiffGenConfig,
    NumericalDomain,
    SetValuedTaxonomy,
    parse_domains,
    parse_tree,
    set_valued_taxonomy,
)
from ehr_release.core.errors import ConfigError, ParameterError

__all__ = [
    "DiffGenConfig",
    "NumericalDomain",
    "SetValuedTaxonomy",
    "config_path",
    "load_config",
    "shipped_names",
]


def shipped_names() -> list[str]:
    """Names of the configurations shipped with the package (``adult``, ``mimic-demo``)."""
    folder = resources.files("ehr_release.configuration.taxonomies")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def config_path(spec: str) -> Path:
    """The YAML file named by ``spec``: a shipped name or a path to a ``.yaml`` file."""
    if spec in shipped_names():
        shipped = resources.files("ehr_release.configuration.taxonomies") / f"{spec}.yaml"
        with resources.as_file(shipped) as p:
            return Path(p)
    path = Path(spec)
    if path.suffix.lower() in {".yaml", ".yml"} and path.is_file():
        return path
    raise ParameterError("taxonomies", "must be a shipped configuration "
                         f"({', '.join(shipped_names())}) or an existing .yaml file", spec)


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = load_config_yaml(read_config_text(path), str(path))  # size, depth: one line
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    except UnicodeDecodeError as exc:  # fix (issue 8 fuzzing): a binary file is a ConfigError
        raise ConfigError(f"{path}: not UTF-8 text ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with class/numerical/categorical "
                          "sections")
    unknown = set(raw) - {"class", "numerical", "categorical", "set_valued"}
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {sorted(unknown)}")
    # fix (issue 8 fuzzing): a section that is not a mapping raised AttributeError
    for section, body in raw.items():
        if body is not None and not isinstance(body, dict):
            raise ConfigError(f"{path}: section {section!r} must be a mapping, "
                              f"got {type(body).__name__}")
    return raw


def _class_section(raw: dict[str, Any], path: Path,
                   class_column: str | None) -> tuple[str, tuple[str, ...]]:
    section = raw.get("class") or {}
    column = class_column or section.get("column")
    if not column:
        raise ConfigError(f"{path}: the class column is not declared (class: column: ...)")
    values = section.get("values")
    if not isinstance(values, list) or any(isinstance(v, bool) for v in values):
        raise ConfigError(f"{path}: class values must be a list of quoted strings, "
                          f"got {values!r}")
    values_t = tuple(str(v) for v in values)
    if len(set(values_t)) < 2:
        raise ConfigError(f"{path}: the class column {column!r} must declare at least two "
                          f"distinct values (a class with one value cannot be predicted); "
                          f"got {list(values_t)}")
    return str(column), values_t


def load_config(spec: str, *, domains: str | None = None, predictors: str | None = None,
                class_column: str | None = None) -> DiffGenConfig:
    """Load and check a configuration.

    Parameters
    ----------
    spec
        Shipped name (see :func:`shipped_names`) or path to a YAML file.
    domains
        Optional override of numerical domains, ``"age=17:91;hours=1:100"`` (integer bounds
        make an integer domain); attributes not yet configured are added.
    predictors
        Optional comma-separated subset of the configured attributes to release.
    class_column
        Optional class column name overriding the configured one (its values stay those of
        the configuration).

    Raises
    ------
    ParameterError
        ``spec``, ``domains`` or ``predictors`` is malformed or names something unknown.
    ConfigError
        The file is malformed (duplicate nodes, bad domains, fewer than two class values).
    """
    path = config_path(spec)
    raw = _read(path)
    column, values = _class_section(raw, path, class_column)
    numerical = parse_domains(raw.get("numerical") or {}, str(path))
    if domains:
        numerical.update(parse_domains(_inline_domains(domains), "parameter 'domains'"))
    categorical = {str(name): parse_tree(tree, f"{path}: categorical {name!r}")
                   for name, tree in (raw.get("categorical") or {}).items()}
    set_valued = {str(name): set_valued_taxonomy(spec_, f"{path}: set_valued {name!r}")
                  for name, spec_ in (raw.get("set_valued") or {}).items()}
    if len(set_valued) > 1:
        raise ConfigError(f"{path}: at most one set-valued attribute is supported")
    names = [*categorical, *numerical, *set_valued]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes or column in names:
        raise ConfigError(f"{path}: attribute(s) {sorted(dupes | ({column} & set(names)))} "
                          "are declared twice or are also the class column")
    if predictors:
        wanted = [p.strip() for p in predictors.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in names]
        if unknown or not wanted:
            raise ParameterError("predictors", f"must name configured attributes "
                                 f"({', '.join(names)})", predictors)
        categorical = {k: v for k, v in categorical.items() if k in wanted}
        numerical = {k: v for k, v in numerical.items() if k in wanted}
        set_valued = {k: v for k, v in set_valued.items() if k in wanted}
    if not (categorical or numerical or set_valued):
        raise ConfigError(f"{path}: no predictor attributes are configured")
    # cut.json publishes ``source``: a shipped name, or a site file by its file name only
    # (the folders it sits in are the site's, not the release's)
    return DiffGenConfig(source=PurePath(str(spec)).name, class_column=column,
                         class_values=values,
                         categorical=categorical, numerical=numerical, set_valued=set_valued)


def _inline_domains(text: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in text.replace(",", ";").split(";"):
        if not item.strip():
            continue
        name, sep, bounds = item.partition("=")
        lo, colon, hi = bounds.partition(":")
        try:
            lo_v, hi_v = float(lo), float(hi)
        except ValueError:
            lo_v = hi_v = float("nan")
        if not sep or not colon or not name.strip() or lo_v != lo_v or hi_v != hi_v:
            raise ParameterError("domains", "must look like NAME=LO:HI;NAME=LO:HI", text)
        integer = lo_v.is_integer() and hi_v.is_integer() and "." not in lo + hi
        out[name.strip()] = {"domain": [lo_v, hi_v], "integer": integer}
    return out
