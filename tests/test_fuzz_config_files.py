"""Hostile configuration *files*: random bytes and random YAML on disk.

``test_fuzz_config.py`` feeds parsed structures and text to the configuration parsers; this
file goes through the loaders that read files — DiffGen taxonomy YAML, ArtUC configuration
and constraints YAML with their ``child,parent`` CSV and YAML hierarchy files, the
disassociation policy file — with bytes that need not be UTF-8, CSV that pandas cannot
tokenize, empty files, and YAML whose sections have the wrong types. Each either loads or
raises an ``EhrReleaseError`` naming the file; anything else is a bug.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release.configuration import taxonomies
from ehr_release.configuration.constraints import load_config as load_artuc_config
from ehr_release.configuration.constraints import read_hierarchy_file
from ehr_release.configuration.policies import resolve_policy
from ehr_release.core.errors import ConfigError, EhrReleaseError
from ehr_release.model.dataset import Dataset

FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

WORDS = ["class", "column", "values", "numerical", "categorical", "set_valued", "domain",
         "attributes", "constraints", "type", "hierarchy", "codes", "age", "All", "401.9",
         "250.00", "h.csv", "h.yaml", "icd9", "low", "high", "integer", "tree"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(WORDS),
                    st.text(max_size=8))
structures = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(WORDS),
                                                      st.text(max_size=5)),
                                            inner, max_size=4)),
    max_leaves=25)


def _yaml(value) -> bytes:
    return yaml.safe_dump(value, allow_unicode=True).encode()


#: file contents: YAML of random structures, random text, random bytes (often not UTF-8)
contents = st.one_of(structures.map(_yaml), st.text(max_size=120).map(str.encode),
                     st.binary(max_size=120),
                     st.sampled_from([b"", b"\xff\xfe\x00", b'"a,b\n', b"child,parent\n",
                                      b"child,parent\na,\n", b"child,parent\na,b\nb,a\n",
                                      b"child,parent\na,root\nb,root\n", b"- [\n", b"{"]))


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def _loads_or_own_error(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except EhrReleaseError as exc:
        assert str(exc).strip(), "an error must name the problem"
        return None


@pytest.fixture
def folder(tmp_path: Path):
    def fresh() -> Path:  # one folder per example (the fixture is shared by all of them)
        path = tmp_path / uuid.uuid4().hex
        path.mkdir()
        return path
    return fresh


# ------------------------------------------------------------------- DiffGen taxonomies
taxonomy_like = st.dictionaries(
    st.sampled_from(["class", "numerical", "categorical", "set_valued"]),
    st.one_of(structures, st.fixed_dictionaries({"column": st.sampled_from(["y", 1, None]),
                                                 "values": structures})),
    max_size=4)


@FUZZ
@given(st.one_of(contents, taxonomy_like.map(_yaml)))
def test_taxonomy_files(folder, data: bytes) -> None:
    path = _write(folder(), "taxonomy.yaml", data)
    _loads_or_own_error(taxonomies.load_config, str(path))


# ------------------------------------------------------------------- ArtUC configuration
attribute = st.one_of(
    structures,
    st.fixed_dictionaries({"type": st.just("categorical"),
                           "hierarchy": st.sampled_from(["h.csv", "h.yaml", "icd9",
                                                         "missing.csv", "../h.csv"])}),
    st.fixed_dictionaries({"type": st.just("numerical"),
                           "domain": st.lists(scalars, max_size=3)}))
artuc_like = st.fixed_dictionaries({
    "attributes": st.dictionaries(st.sampled_from(["age", "origin", "x"]), attribute,
                                  min_size=1, max_size=2),
    "constraints": st.one_of(structures, st.lists(structures, max_size=2))})


@FUZZ
@given(st.one_of(contents, artuc_like.map(_yaml)), contents, contents,
       st.one_of(st.none(), contents))
def test_artuc_configuration_files(folder, config: bytes, csv: bytes, tree: bytes,
                                   constraints: bytes | None) -> None:
    base = folder()
    path = _write(base, "config.yaml", config)
    _write(base, "h.csv", csv)
    _write(base, "h.yaml", tree)
    extra = None if constraints is None else _write(base, "constraints.yaml", constraints)
    _loads_or_own_error(load_artuc_config, path, extra)


@FUZZ
@given(contents, st.sampled_from(["h.csv", "h.yaml", "h.txt"]))
def test_hierarchy_files(folder, data: bytes, name: str) -> None:
    base = folder()
    _write(base, name, data)
    _loads_or_own_error(read_hierarchy_file, name, base)


# ------------------------------------------------------------------- disassociation policy
#: constraint lists that overlap, repeat codes, or hold numbers
policy_like = st.one_of(
    st.lists(st.lists(st.sampled_from(["401.9", "250.00", "272.0", 296.0, ""]), max_size=3),
             max_size=4),
    st.dictionaries(st.text(max_size=3),
                    st.lists(st.sampled_from(["401.9", "250.00", "272.0"]), max_size=3),
                    max_size=3),
    st.fixed_dictionaries({"constraints": structures}))


@FUZZ
@given(st.one_of(contents, policy_like.map(_yaml)))
def test_policy_files(folder, data: bytes) -> None:
    path = _write(folder(), "policy.yaml", data)
    dataset = Dataset.from_records([["401.9", "250.00"], ["272.0"], ["401.9"]])
    policy = _loads_or_own_error(resolve_policy, str(path), dataset)
    if policy is not None:  # what loads is a set of disjoint constraints
        seen: set[str] = set()
        for constraint in policy.constraints:
            assert not (seen & constraint), policy
            seen |= constraint


def test_overlapping_policy_constraints_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "policy.yaml", _yaml([["401.9", "250.00"], ["250.00"]]))
    with pytest.raises(EhrReleaseError, match="250.00"):
        resolve_policy(str(path), Dataset.from_records([["401.9", "250.00"]]))


@pytest.mark.parametrize("loader", ["taxonomy", "artuc", "hierarchy", "policy"])
def test_a_binary_file_is_named_in_the_error(tmp_path: Path, loader: str) -> None:
    """The regression behind this file: non-UTF-8 bytes raised UnicodeDecodeError."""
    data = b"\xff\xfe\x00\x81binary"
    if loader == "taxonomy":
        call = lambda: taxonomies.load_config(str(_write(tmp_path, "t.yaml", data)))  # noqa: E731
    elif loader == "artuc":
        call = lambda: load_artuc_config(_write(tmp_path, "c.yaml", data))  # noqa: E731
    elif loader == "hierarchy":
        _write(tmp_path, "h.csv", data)
        call = lambda: read_hierarchy_file("h.csv", tmp_path)  # noqa: E731
    else:
        call = lambda: resolve_policy(str(_write(tmp_path, "p.yaml", data)),  # noqa: E731
                                      Dataset.from_records([["401.9"]]))
    with pytest.raises((ConfigError, EhrReleaseError)) as err:
        call()
    assert tmp_path.name in str(err.value)
