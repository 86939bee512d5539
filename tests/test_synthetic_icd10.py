"""The age/gender-dependent generator on ICD-10-CM: fitted to the shipped ICD-10 copy of
the MIMIC-III demo (examples/data/mimic3-demo-icd10), it draws ICD-10-CM codes only, with
the ICD-10 tail backed off to ICD-10 categories."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ehr_release.ingest import read_dataset
from ehr_release.model.dataset import CODE, PATIENT_ID
from ehr_release.model.hierarchy import code_hierarchy
from ehr_release.samples.synthetic import CATEGORY_LEVEL, expected_prevalence, fit, generate

DEMO10 = Path(__file__).resolve().parents[1] / "examples" / "data" / "mimic3-demo-icd10"


@pytest.fixture(scope="module")
def model():
    return fit(read_dataset(DEMO10))


def test_an_icd10_fit_draws_icd10_codes_and_uses_the_tail(model) -> None:
    h = code_hierarchy("icd10")
    assert model.code_system == "icd10"
    big = generate(model, 5_000, np.random.default_rng(5))
    assert big.code_system == "icd10"
    assert set(big.distinct_codes()) <= set(h.parent)
    assert not big.diagnoses.duplicated([PATIENT_ID, CODE]).any()
    tail = model.vocabulary[model.seen:]
    assert all(h.is_leaf(c) for c in tail[::500])  # unseen ICD-10-CM leaves
    assert {h.ancestor_at_level(c, CATEGORY_LEVEL) for c in tail[::500]} <= {
        n for n, lv in h.level.items() if lv == CATEGORY_LEVEL}
    unseen = ~big.diagnoses[CODE].isin(set(model.vocabulary[:model.seen]))
    assert unseen.mean() == pytest.approx(model.unseen_mass, abs=0.04)


def test_the_commonest_icd10_code_keeps_its_age_dependence(model) -> None:
    """Per cell, the share of generated patients with the demo's commonest code follows the
    fitted model (so the ICD-10 copy's age/gender structure carries over)."""
    expected = expected_prevalence(model)
    top = int(np.argmax(expected.mean(axis=0)))
    big = generate(model, 20_000, np.random.default_rng(9))
    pats = big.patients
    age = pats["age"].to_numpy(dtype=int)
    band = np.full(len(age), -1)
    for b, (lo, hi) in enumerate(model.bands):
        band[(age >= lo) & (age <= hi)] = b
    cell = band * len(model.genders) + np.array([model.genders.index(g)
                                                 for g in pats["gender"]])
    has = set(big.diagnoses.loc[big.diagnoses[CODE] == model.vocabulary[top], PATIENT_ID])
    with_code = np.array([p in has for p in pats.index])
    for g in range(model.n_cells):
        members = cell == g
        if members.sum() >= 500:
            assert with_code[members].mean() == pytest.approx(expected[g, top], abs=0.05)
