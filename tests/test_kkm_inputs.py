"""Issue 17 part 5: the (k, k^m) verifier and attack read the original themselves.

``ehr_release.privacy.kkm_inputs.read_original`` is written apart from the anonymizer's
``constraints.rt_data``; the two must still agree — on what they read and on what they
refuse (the same error, row and column) — or the verifier would judge another dataset than
the one anonymized. Checked here on random datasets mixing valid and invalid values, and on
the worked example of the ArtUC paper (Table 2 / spec 02).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ehr_release.configuration.constraints import parse_config, rt_data
from ehr_release.core.errors import ConfigError, InputError
from ehr_release.model.dataset import Dataset
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.privacy import kkm as verifier_module
from ehr_release.privacy import kkm_inputs
from ehr_release.privacy.attacks import kkm as attack_module
from ehr_release.privacy.kkm_inputs import read_original
from tests.test_artuc_properties import ATTRS, CODES
from tests.test_artuc_worked_example import worked_example

CONFIGURED = parse_config({"attributes": ATTRS, "constraints": [{"codes": "all"}]},
                          lambda ref: icd9_hierarchy())

code_sets = st.sets(st.sampled_from(CODES), max_size=4)
valid = st.tuples(st.one_of(st.integers(0, 60), st.floats(0.0, 60.0), st.just("42")),
                  st.sampled_from(["Oslo", "Riga", "Rome", "Nice", "North", "All"]),
                  st.sampled_from(["F", "M", "All"]), code_sets)
#: Values each attribute must refuse: out of the domain, missing, not a number, not a node.
BAD = (st.sampled_from([-1, 61, -0.5, 60.5, None, float("nan"), "forty", ""]),
       st.sampled_from(["Mars", "", None, "oslo"]),
       st.sampled_from(["X", None, ""]))


@st.composite
def invalid(draw):
    """A valid row with one attribute's value replaced by one it must refuse."""
    row = list(draw(valid))
    which = draw(st.integers(0, 2))
    row[which] = draw(BAD[which])
    return tuple(row)


#: Half the datasets are valid throughout (read alike), half carry invalid values (refused
#: alike, at the same first row and column, quoting the same value).
rows = st.one_of(st.lists(valid, max_size=15),
                 st.lists(st.one_of(valid, invalid()), min_size=1, max_size=15))


def _dataset(records, columns=("age", "origin", "sex")) -> Dataset:
    demo = pd.DataFrame([r[:3] for r in records], columns=list(columns))
    return Dataset.from_records([sorted(r[3]) for r in records], demo)


def _outcome(read, dataset, config):
    try:
        return read(dataset, config)
    except (ConfigError, InputError) as exc:
        return exc


def _assert_same(dataset: Dataset, config) -> str:
    theirs, ours = _outcome(rt_data, dataset, config), _outcome(read_original, dataset, config)
    if isinstance(theirs, Exception) or isinstance(ours, Exception):
        assert type(ours) is type(theirs) and str(ours) == str(theirs)
        if isinstance(theirs, InputError):
            assert (ours.row, ours.column) == (theirs.row, theirs.column)
        return "refused alike"
    assert ours.patient_ids == theirs.patient_ids
    assert ours.codes == theirs.codes
    pd.testing.assert_frame_equal(ours.demographics, theirs.demographics)
    for name in config.names:  # element types matter too: the attack groups by str(value)
        assert [type(v) for v in ours.demographics[name]] == \
            [type(v) for v in theirs.demographics[name]]
    return "read alike"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows)
def test_the_verifier_reads_and_refuses_what_the_anonymizer_does(records) -> None:
    outcome = _assert_same(_dataset(records), CONFIGURED)
    event(outcome)


def test_the_worked_example_is_read_alike() -> None:
    """The ArtUC paper's Table 2 records under the spec's configuration (spec 02)."""
    dataset, config = worked_example()
    _assert_same(dataset, config)
    original = read_original(dataset, config)
    assert len(original.patient_ids) == dataset.n_patients
    assert list(original.demographics.columns) == config.names


def test_a_missing_attribute_and_bad_values_are_refused_with_where() -> None:
    other = parse_config({"attributes": {"height": {"type": "numerical", "domain": [0, 3]}}},
                         lambda ref: icd9_hierarchy())
    with pytest.raises(ConfigError, match="'height' is not a column"):
        read_original(_dataset([(30, "Oslo", "F", set())]), other)
    with pytest.raises(InputError, match=r"row 2, column 'age': value is missing or outside"):
        read_original(_dataset([(30, "Oslo", "F", set()), (None, "Oslo", "F", set())]),
                      CONFIGURED)
    with pytest.raises(InputError, match=r"row 1, column 'origin': value is not a node"):
        read_original(_dataset([(30, "Mars", "F", set())]), CONFIGURED)


def test_numbers_are_floats_and_nodes_are_text() -> None:
    original = read_original(_dataset([(30, "Oslo", "F", {"401.9"}), (0, "All", "M", set())]),
                             CONFIGURED)
    assert original.demographics["age"].dtype == np.float64
    assert original.demographics["origin"].tolist() == ["Oslo", "All"]
    assert original.codes == [frozenset({"401.9"}), frozenset()]


def test_neither_verifier_nor_attack_reads_through_the_anonymizer() -> None:
    for module in (verifier_module, attack_module, kkm_inputs):
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    for a in n.names}
        assert "rt_data" not in imported and "RTData" not in imported, module.__name__

