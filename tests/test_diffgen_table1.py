"""The worked example of the DiffGen spec (Table 1 of the paper; ε = 1, h = 2) as fixtures.

Every number the spec gives is reproduced: ε' = 0.1, the Max scores at the root (Any_Sex 4,
Any_Code 4, Age split at 37 → 7), the partitions after specializing Any_Code, and the
linkage of Example 1. The helpers here are reused by the other DiffGen tests.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ehr_release.algorithms.diffgen import (
    DiffGenParams,
    encode_dataset,
    epsilon_prime,
    noise_source,
    run_diffgen,
)
from ehr_release.algorithms.diffgen.generalize import generalize
from ehr_release.algorithms.diffgen.release import release_files
from ehr_release.algorithms.diffgen.scores import score_tables
from ehr_release.algorithms.diffgen.splits import split_candidates
from ehr_release.algorithms.diffgen.state import SearchState
from ehr_release.configuration.taxonomies import load_config
from ehr_release.model.dataset import Dataset
from ehr_release.privacy.diffgen import verify

TABLE1 = [  # ID, Sex, Age, Codes, Class
    (1, "Male", 34, ["11", "12", "21", "22"], "Y"),
    (2, "Female", 65, ["12", "22"], "N"),
    (3, "Male", 38, ["12"], "N"),
    (4, "Female", 33, ["11", "12"], "Y"),
    (5, "Female", 18, ["12"], "Y"),
    (6, "Male", 37, ["11"], "N"),
    (7, "Male", 32, ["11", "12", "21", "22"], "Y"),
    (8, "Female", 25, ["12", "21", "22"], "N"),
]

TABLE1_YAML = """\
class: {column: class, values: ["Y", "N"]}
numerical:
  age: {domain: [18, 66], integer: true}
categorical:
  sex:
    Any_Sex: [Male, Female]
set_valued:
  codes:
    taxonomy:
      Any_Code:
        "1*": ["11", "12"]
        "2*": ["21", "22"]
"""


def table1_dataset(rows=TABLE1) -> Dataset:
    demo = pd.DataFrame({"sex": [r[1] for r in rows], "age": [r[2] for r in rows],
                         "class": [r[4] for r in rows]})
    return Dataset.from_records([r[3] for r in rows], demo, class_column="class",
                                patient_ids=[str(r[0]) for r in rows])


def table1_config_path(folder: Path, text: str = TABLE1_YAML) -> Path:
    path = folder / "table1.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return table1_config_path(tmp_path)


@pytest.fixture
def enc(config_path: Path):
    return encode_dataset(table1_dataset(), load_config(str(config_path)))


def _ids(state: SearchState, partition: int) -> set[int]:
    return {i + 1 for i in np.flatnonzero(state.pid == partition)}


def test_budget_arithmetic_gives_epsilon_prime_one_tenth() -> None:
    # ε' = ε / (2·(|numerical| + 2h)) = 1 / (2·(1 + 4)) = 0.1
    assert epsilon_prime(Fraction(1), 1, 2) == Fraction(1, 10)


def test_max_scores_at_the_root(enc) -> None:
    state = SearchState(enc, "max")
    values, classes = state.interval_records(1, 0)
    dom = enc.numerical[0].domain
    cands = split_candidates(values, classes, 2, 18, 66, dom)
    scores = score_tables("max", cands.tables())
    best = int(np.argmax(scores))
    assert scores[best] == 7 and (scores == 7).sum() == 1
    assert cands.start[best] + 1 <= 37 <= cands.end[best]  # 37 is a best split point
    state.points[0][0] = 37.0
    cands_root = state.candidates()
    by_name = {state.names[c.col]: s for c, s in zip(cands_root, state.scores(cands_root),
                                                     strict=True)}
    assert by_name == {"sex": 4.0, "age": 7.0, "codes": 4.0}


def test_infogain_scores_at_the_root_follow_the_entropy_formula(enc) -> None:
    state = SearchState(enc, "infogain")
    state.points[0][0] = 37.0
    cands = state.candidates()
    by_name = {state.names[c.col]: s for c, s in zip(cands, state.scores(cands), strict=True)}
    # Sex and codes split 4Y/4N into two 2Y/2N halves: no information gained.
    assert by_name["sex"] == pytest.approx(0.0)
    assert by_name["codes"] == pytest.approx(0.0)
    # Age at 37: [18,37) holds 4Y+1N, [37,66) 3N.
    h_left = -(0.8 * math.log2(0.8) + 0.2 * math.log2(0.2))
    assert by_name["age"] == pytest.approx(1.0 - 5 / 8 * h_left)


def test_specializing_any_code_gives_the_papers_partitions(enc) -> None:
    state = SearchState(enc, "max")
    split = state.prepare_set(0)
    names = state.enc.set_valued.index.names
    children = [names[c] for c in state.enc.set_valued.index.children[0]]
    labels = {int(m): {children[b] for b in range(2) if m >> b & 1} for m in split.combos}
    counts = dict(zip((frozenset(labels[int(m)]) for m in split.combos), split.counts[0],
                      strict=True))
    assert counts == {frozenset(): 0, frozenset({"1*"}): 4, frozenset({"2*"}): 0,
                      frozenset({"1*", "2*"}): 4}
    state.apply_set(split, split.counts > 0)  # keep the truly non-empty children
    live, _ = state.group_counts()
    by_label = {state.set_label(int(state.rows[p, 2])): _ids(state, p) for p in live}
    assert by_label == {"1*": {3, 4, 5, 6}, "1*;2*": {1, 2, 7, 8}}


def test_example1_linkage_is_broken_by_the_generalized_codes(enc, config_path) -> None:
    raw = [r for r in TABLE1 if r[1] == "Female" and "11" in r[3]]
    assert [r[0] for r in raw] == [4]  # a female with code 11 is uniquely record #4
    cut = {"attributes": [
        {"name": "sex", "kind": "categorical", "cut": ["Male", "Female"]},
        {"name": "age", "kind": "numerical", "intervals": [[18, 66]]},
        {"name": "codes", "kind": "set-valued", "cut": ["1*", "2*"],
         "taxonomy_root": "Any_Code"}]}
    rows = generalize(enc, cut)
    record4 = rows.iloc[3]
    same = rows[(rows["sex"] == record4["sex"]) & (rows["codes"] == record4["codes"])]
    assert record4["codes"] == "1*" and len(same) == 2  # #4 now shares its group with #5


@pytest.mark.parametrize("seed", [None, 7])
def test_the_example_runs_end_to_end_and_verifies(config_path, seed) -> None:
    config = load_config(str(config_path))
    enc = encode_dataset(table1_dataset(), config)
    params = DiffGenParams(Fraction(1), 2)
    result = run_diffgen(enc, params, noise_source(seed, np.random.default_rng(seed)))
    charges = result.ledger.charges
    assert result.epsilon_prime == Fraction(1, 10)
    assert all(c.epsilon == Fraction(1, 10) for c in charges if c.phase != "final-counts")
    assert result.ledger.spent() == 1
    files = release_files(result, config, params)
    report = verify(files, table1_dataset(), {"epsilon": 1.0, "h": 2, "seed": seed,
                                              "taxonomies": str(config_path)})
    assert report.holds, report.to_dict()
