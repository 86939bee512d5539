"""C4.5 (utility/c45.py) against textbook worked examples and properties.

Sources of the numbers:
* Quinlan, *C4.5: Programs for Machine Learning* (1993), §2.2: the golf/weather data
  (14 cases, 9 play / 5 don't) has info 0.940 bits, info after splitting on outlook
  0.694, gain 0.246, split info 1.577 and gain ratio 0.156; outlook is the root test.
* Witten, Frank & Hall, *Data Mining* (3rd ed.), §4.3, the gain-ratio table of the nominal
  weather data: temperature gain 0.029 / split info 1.557 / ratio 0.019, humidity
  0.152 / 1.000 / 0.152, windy 0.048 / 0.985 / 0.049; and §11 (J48 on weather.nominal):
  the pruned tree has 5 leaves, outlook → humidity (sunny), windy (rainy).
* Quinlan 1993, §4.2 (pessimistic pruning, congressional voting): a subtree with leaves of
  6, 9 and 1 cases and no errors predicts 6×0.206 + 9×0.143 + 1×0.750 = 3.273 errors; as one
  leaf of 16 cases with 1 error, 16×0.157 = 2.512, so the subtree is replaced by the leaf.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.utility.c45 import C45Classifier, added_errors

#: The weather data (Quinlan 1993 Figure 1-1 with nominal temperature and humidity, as in
#: Witten et al. Table 1.2): outlook, temperature, humidity, windy → play.
WEATHER_ROWS = [
    ("sunny", "hot", "high", "false", "no"),
    ("sunny", "hot", "high", "true", "no"),
    ("overcast", "hot", "high", "false", "yes"),
    ("rainy", "mild", "high", "false", "yes"),
    ("rainy", "cool", "normal", "false", "yes"),
    ("rainy", "cool", "normal", "true", "no"),
    ("overcast", "cool", "normal", "true", "yes"),
    ("sunny", "mild", "high", "false", "no"),
    ("sunny", "cool", "normal", "false", "yes"),
    ("rainy", "mild", "normal", "false", "yes"),
    ("sunny", "mild", "normal", "true", "yes"),
    ("overcast", "mild", "high", "true", "yes"),
    ("overcast", "hot", "normal", "false", "yes"),
    ("rainy", "mild", "high", "true", "no"),
]
WEATHER = pd.DataFrame([r[:4] for r in WEATHER_ROWS],
                       columns=["outlook", "temperature", "humidity", "windy"])
PLAY = [r[4] for r in WEATHER_ROWS]


def test_weather_root_statistics_are_the_textbook_values() -> None:
    """Quinlan 1993 §2.2 (outlook) and Witten et al. §4.3 (the other three attributes)."""
    scores = C45Classifier().root_scores(WEATHER, PLAY)
    info = 0.940
    outlook = scores["outlook"]
    assert outlook.gain == pytest.approx(0.246, abs=1e-3)
    assert info - outlook.gain == pytest.approx(0.694, abs=1e-3)
    assert outlook.split_info == pytest.approx(1.577, abs=1e-3)
    assert outlook.gain_ratio == pytest.approx(0.156, abs=1e-3)
    for name, gain, split, ratio in [("temperature", 0.029, 1.557, 0.019),
                                     ("humidity", 0.152, 1.000, 0.152),
                                     ("windy", 0.048, 0.985, 0.049)]:
        assert scores[name].gain == pytest.approx(gain, abs=1e-3), name
        assert scores[name].split_info == pytest.approx(split, abs=1e-3), name
        assert scores[name].gain_ratio == pytest.approx(ratio, abs=1e-3), name
    assert max(scores, key=lambda n: scores[n].gain_ratio) == "outlook"


def test_weather_tree_is_j48s_tree() -> None:
    """Witten et al. §11: J48 (C4.5 release 8) on weather.nominal, 5 leaves."""
    model = C45Classifier().fit(WEATHER, PLAY)
    assert model.describe().splitlines() == [
        "outlook = overcast: yes (4)",
        "outlook = rainy",
        "|   windy = false: yes (3)",
        "|   windy = true: no (2)",
        "outlook = sunny",
        "|   humidity = high: no (3)",
        "|   humidity = normal: yes (2)",
    ]
    assert model.leaves() == 5
    assert (model.predict(WEATHER) == np.array(PLAY)).all()


def test_upper_error_limits_are_quinlans() -> None:
    """Quinlan 1993 §4.2: U25%(0,6) = 0.206, U25%(0,9) = 0.143, U25%(0,1) = 0.750,
    U25%(1,16) = 0.157 (the last by the normal approximation of the C4.5 code)."""
    def rate(n: float, e: float) -> float:
        return (e + added_errors(n, e, 0.25)) / n

    assert rate(6, 0) == pytest.approx(0.206, abs=1e-3)
    assert rate(9, 0) == pytest.approx(0.143, abs=1e-3)
    assert rate(1, 0) == pytest.approx(0.750, abs=1e-3)
    assert rate(16, 1) == pytest.approx(0.157, abs=1e-3)
    subtree = sum(n * rate(n, 0) for n in (6, 9, 1))
    assert subtree == pytest.approx(3.273, abs=2e-3)
    assert 16 * rate(16, 1) == pytest.approx(2.512, abs=0.01)
    # more confidence (smaller cf) predicts more errors
    assert added_errors(16, 1, 0.1) > added_errors(16, 1, 0.25) > added_errors(16, 1, 0.5)


def _voting_subtree() -> tuple[pd.DataFrame, list[str]]:
    """Quinlan's §4.2 node: 16 cases split by one vote into pure branches of 6, 9 and 1."""
    vote = ["n"] * 6 + ["y"] * 9 + ["u"]
    party = ["democrat"] * 15 + ["republican"]
    return pd.DataFrame({"education_spending": vote}), party


def test_the_voting_subtree_is_pruned_to_a_leaf() -> None:
    x, party = _voting_subtree()
    pruned = C45Classifier().fit(x, party)
    assert pruned.root_.is_leaf and pruned.classes_[pruned.root_.cls] == "democrat"
    # the same node is kept when pruning is nearly off (cf close to 1 adds few errors)
    kept = C45Classifier(cf=0.99).fit(x, party)
    assert not kept.root_.is_leaf and kept.leaves() == 3


def test_numerical_threshold_is_the_largest_training_value_below_the_cut() -> None:
    x = pd.DataFrame({"v": [1.0, 2.0, 3.0, 10.0, 11.0, 12.0]})
    y = ["a", "a", "a", "b", "b", "b"]
    model = C45Classifier(cf=0.99).fit(x, y)
    assert model.root_.threshold == 3.0
    assert model.predict(pd.DataFrame({"v": [3.0, 3.5, 9.0]})).tolist() == ["a", "b", "b"]


def test_multiway_split_and_unseen_values() -> None:
    """One branch per category; a category unknown to training takes the node's class."""
    x = pd.DataFrame({"c": ["r"] * 5 + ["g"] * 5 + ["b"] * 8})
    y = ["p"] * 5 + ["q"] * 5 + ["p"] * 8
    model = C45Classifier().fit(x, y)
    assert len(model.root_.children) == 3
    assert model.predict(pd.DataFrame({"c": ["g", "r", "violet"]})).tolist() == ["q", "p",
                                                                                  "p"]


def test_a_split_needs_two_branches_with_two_cases() -> None:
    """min_objs: a value held by a single case cannot be split off on its own."""
    x = pd.DataFrame({"c": ["a"] * 9 + ["b"]})
    y = ["p"] * 9 + ["q"]
    assert C45Classifier(cf=0.99).fit(x, y).root_.is_leaf


def test_missing_values_are_refused() -> None:
    with pytest.raises(ValueError, match="missing"):
        C45Classifier().fit(pd.DataFrame({"v": [1.0, np.nan, 2.0, 3.0]}), list("aabb"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 6), st.sampled_from("xy"),
                          st.integers(1, 4)), min_size=4, max_size=40))
def test_a_weight_is_that_many_copies(rows: list[tuple[str, int, str, int]]) -> None:
    """C4.5 counts a case of weight w as w cases: weights and duplicated rows give the
    same tree (the DiffGen groups are weighted rows)."""
    cat, num, label, weight = zip(*rows, strict=True)
    x = pd.DataFrame({"c": list(cat), "n": np.array(num, dtype=float)})
    weighted = C45Classifier().fit(x, list(label), sample_weight=list(weight))
    rep = np.repeat(np.arange(len(rows)), weight)
    copied = C45Classifier().fit(x.iloc[rep].reset_index(drop=True),
                                 np.array(label)[rep])
    assert weighted.describe() == copied.describe()
    grid = pd.DataFrame({"c": list("abcabc"), "n": [0.0, 2.0, 4.0, 6.0, 1.0, 5.0]})
    assert (weighted.predict(grid) == copied.predict(grid)).all()


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 4), st.integers(3, 12), st.randoms(use_true_random=False))
def test_a_separating_category_is_learned_exactly(k: int, per: int, rnd) -> None:
    """A category that determines the class (≥ 3 cases per value) is the root test and the
    tree fits the training data exactly, whatever the row order; the other two columns
    repeat the same values under every category, so they carry no class information."""
    rows = [(f"v{i}", "pqr"[r % 3], float(r), f"class{i % 2}")
            for i in range(k) for r in range(per)]
    rnd.shuffle(rows)
    x = pd.DataFrame([r[:3] for r in rows], columns=["key", "noise", "num"])
    label = [r[3] for r in rows]
    model = C45Classifier().fit(x, label)
    assert (model.predict(x) == np.array(label)).all()
    assert model.describe().startswith("key = ")


def _pairs_and_flag(weak: bool) -> tuple[pd.DataFrame, list[str]]:
    """16 cases, 8 per class: ``pair`` names 8 pure pairs (gain 1, split info 3 bits,
    ratio 1/3), ``flag`` is right 14 times out of 16 (gain 0.456, split info 1, ratio
    0.456); with ``weak`` two class-free binary columns (gain 0) join them."""
    cls = ["n" if i < 8 else "y" for i in range(16)]
    x = pd.DataFrame({"pair": [f"p{i // 2}" for i in range(16)],
                      "flag": ["a" if i < 7 or i == 8 else "b" for i in range(16)]})
    if weak:
        x["weak1"] = ["x" if i % 2 == 0 else "y" for i in range(16)]
        x["weak2"] = ["u" if (i // 2) % 2 == 0 else "v" for i in range(16)]
    return x, cls


def test_gain_ratio_among_attributes_with_average_gain() -> None:
    """C4.5 §2.2: the test maximizes gain ratio, but only among attributes whose gain is at
    least the average. Alone with ``pair``, ``flag``'s gain (0.456) is below the average
    (0.728), so the many-valued ``pair`` is chosen; two zero-gain columns lower the average
    to 0.364 and ``flag``, the better ratio, wins. Plain gain would pick ``pair`` both times,
    plain gain ratio ``flag`` both times."""
    x, cls = _pairs_and_flag(weak=False)
    scores = C45Classifier().root_scores(x, cls)
    assert scores["pair"].gain_ratio == pytest.approx(1 / 3)
    assert scores["flag"].gain == pytest.approx(0.456, abs=1e-3)
    assert C45Classifier().fit(x, cls).describe().startswith("pair = ")
    x, cls = _pairs_and_flag(weak=True)
    assert C45Classifier().fit(x, cls).describe().startswith("flag = ")
