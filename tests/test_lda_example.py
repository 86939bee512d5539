"""LDA: the spec's worked A-GS example (§2), the thesis' Example 4/5 figures, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from ehr_release.algorithms.lda import AgeTree, anonymize_trajectories, make_model
from ehr_release.algorithms.lda.align import ags_align, baseline_align
from ehr_release.algorithms.lda.anonymize import decode, encode
from ehr_release.core.errors import EhrReleaseError, InputError, ParameterError
from ehr_release.model.hierarchy import Hierarchy, icd9_hierarchy

# Toy trees of the example: ICD 401 → {401.0, 401.1, 401.9}; ages 33–40 as a binary tree.
TOY = Hierarchy(parent={"401.0": "401", "401.1": "401", "401.9": "401"},
                level={"401": 0, "401.0": 1, "401.1": 1, "401.9": 1}, root="401")
X = [("401.1", 34), ("401.1", 35), ("401.1", 37)]
Y = [("401.1", 34), ("401.1", 36)]


def toy_model(leaf_count: int = 0, w_icd: float = 0.5):
    return make_model(TOY, ["401.0", "401.1", "401.9"], w_icd=w_icd, w_age=1 - w_icd,
                      leaf_count=leaf_count, ages=AgeTree(first=33, depth=3))


def test_ags_worked_example_trajectory_and_losses():
    model = toy_model()
    x, y = encode(model, [X, Y])
    out = ags_align(model, x, y)
    assert decode(model, (out.icd, out.age)) == [("401.1", (34, 34)), ("401.1", (35, 36))]
    assert out.d_icd / model.icd.size == pytest.approx(1.0)  # ILM 1: 401.1 of x3 suppressed
    assert out.d_age / model.age.size == pytest.approx(1.5)  # 37 suppressed + 35, 36 → [35−36]
    # the alignment is symmetric in cost and result
    back = ags_align(model, y, x)
    assert (back.d_icd, back.d_age) == (out.d_icd, out.d_age)
    assert decode(model, (back.icd, back.age)) == decode(model, (out.icd, out.age))


@pytest.mark.parametrize("leaf_count", [0, 1])
def test_example_4_lm_of_33_34_to_33_36(leaf_count):
    model = toy_model(leaf_count)
    block = model.age.from_interval
    lm = (model.age_lc(np.asarray(block(33, 36))) - model.age_lc(np.asarray(block(33, 34))))
    assert lm / model.age.size == pytest.approx(0.25)
    assert block(33, 35) is None and block(34, 35) is None  # not blocks of the tree


def test_example_5_first_cells_use_leaf_count_zero():
    """Thesis Example 5 (w = 0.5): generalizing 401.1 with 401.9 (age 33 both) costs 1,
    suppressing either pair costs 1 (0.5 ICD + 0.5 Age)."""
    model = toy_model()
    (a_i, a_a), (b_i, b_a) = encode(model, [[("401.1", 33)], [("401.9", 33)]])
    li, la, gi, ga = model.generalization(a_i, a_a, b_i, b_a)
    assert model.icd.names[int(li[0])] == "401" and model.age.interval(int(la[0])) == (33, 33)
    assert float(model.objective(gi, ga)[0]) == pytest.approx(1.0)
    assert float(model.objective(*model.suppression(b_i, b_a))[0]) == pytest.approx(1.0)
    # Def. 4 read literally (a leaf counts 1) changes the figure: (3 − 1) / 3 per side
    literal = toy_model(leaf_count=1)
    (a_i, a_a), (b_i, b_a) = encode(literal, [[("401.1", 33)], [("401.9", 33)]])
    _, _, gi, ga = literal.generalization(a_i, a_a, b_i, b_a)
    assert float(literal.objective(gi, ga)[0]) == pytest.approx(0.5 * 4 / 3)


def test_example_as_a_release_of_two_records():
    model = toy_model()
    result = anonymize_trajectories([X, Y], 2, model, "ags")
    expected = [("401.1", (34, 34)), ("401.1", (35, 36))]
    assert result.published == [expected, expected]
    assert result.cluster_of == [0, 0]
    # Def. 8: mean of LM(T)/|T|; X loses ICD 1 (x3) and Age 0.25 + 1, Y loses Age 0.25
    assert result.ilm == pytest.approx((1 / 3 + 0) / 2)
    assert result.alm == pytest.approx((1.25 / 3 + 0.25 / 2) / 2)


def test_baseline_pairs_by_index_and_costs_more_when_misaligned():
    model = toy_model()
    x, y = encode(model, [X, [("401.1", 35), ("401.1", 37)]])
    ags, base = ags_align(model, x, y), baseline_align(model, x, y)
    assert decode(model, (ags.icd, ags.age)) == [("401.1", (35, 35)), ("401.1", (37, 37))]
    assert decode(model, (base.icd, base.age)) == [("401.1", (33, 36)), ("401.1", (33, 40))]
    assert model.objective(ags.d_icd, ags.d_age) < model.objective(base.d_icd, base.d_age)


def test_weights_steer_the_alignment():
    """ICD weight only: keep codes exact and blur ages; Age weight only: the reverse."""
    x_t, y_t = [("401.0", 33), ("401.1", 40)], [("401.1", 33), ("401.0", 40)]
    icd_heavy = toy_model(w_icd=1.0)
    out = ags_align(icd_heavy, *encode(icd_heavy, [x_t, y_t]))
    assert decode(icd_heavy, (out.icd, out.age)) == [("401.1", (33, 40))]
    assert (out.d_icd, out.d_age) == (6, 8 + 8 + 8 + 8)
    age_heavy = toy_model(w_icd=0.0)
    out = ags_align(age_heavy, *encode(age_heavy, [x_t, y_t]))
    assert decode(age_heavy, (out.icd, out.age)) == [("401", (33, 33)), ("401", (40, 40))]
    assert (out.d_icd, out.d_age) == (12, 0)


# ---------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("age", [0, 129, -3])
def test_age_outside_1_128_is_refused_naming_it(age):
    model = make_model(icd9_hierarchy(), ["401.9"])
    with pytest.raises(InputError,
                       match=rf"outside the age hierarchy 1–128 \(age {age}\)") as err:
        anonymize_trajectories([[("401.9", 40)], [("401.9", age)]], 2, model)
    assert str(age) not in err.value.public().replace("1–128", "")  # stored without the value


def test_unknown_code_is_refused_naming_it():
    model = make_model(icd9_hierarchy(), ["401.9"])
    with pytest.raises(InputError,
                       match=r"not a node of the ICD hierarchy \(code '999.99'\)") as err:
        anonymize_trajectories([[("401.9", 40)], [("999.99", 41)]], 2, model)
    assert "999.99" not in err.value.public()  # the terminal names it; the stored message not


@pytest.mark.parametrize("k", [1, 3, True])
def test_bad_k_is_a_parameter_error(k):
    with pytest.raises(ParameterError, match="'k'"):
        anonymize_trajectories([X, Y], k, toy_model())


@pytest.mark.parametrize("kwargs, name", [
    ({"w_icd": 0.7, "w_age": 0.5}, "w_age"), ({"w_icd": 1.5, "w_age": -0.5}, "w_icd"),
    ({"leaf_count": 2}, "leaf_count"),
])
def test_bad_model_settings_are_parameter_errors(kwargs, name):
    with pytest.raises(ParameterError, match=f"'{name}'") as info:
        make_model(TOY, ["401.1"], ages=AgeTree(33, 3), **kwargs)
    assert isinstance(info.value, EhrReleaseError)
