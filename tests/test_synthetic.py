"""The age/gender-dependent generator: fitted to the MIMIC-III demo, reproduces its fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release.core.errors import ParameterError
from ehr_release.ingest import read_dataset
from ehr_release.model.dataset import CODE, PATIENT_ID
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.samples.synthetic import (
    MIN_CELL,
    CodeModel,
    expected_prevalence,
    fit,
    generate,
)
from tests.conftest import SHARED_DATA

DEMO = SHARED_DATA / "mimic3-demo"
pytestmark = pytest.mark.skipif(not DEMO.exists(), reason=f"no MIMIC-III demo at {DEMO}")


@pytest.fixture(scope="module")
def demo():
    return read_dataset(DEMO)


@pytest.fixture(scope="module")
def model(demo) -> CodeModel:
    return fit(demo)


@pytest.fixture(scope="module")
def big(model: CodeModel):
    return generate(model, 20_000, np.random.default_rng(3))


def _cells(model: CodeModel, patients: pd.DataFrame) -> np.ndarray:
    age = patients["age"].to_numpy(dtype=int)
    band = np.full(len(age), -1)
    for b, (lo, hi) in enumerate(model.bands):
        band[(age >= lo) & (age <= hi)] = b
    gender = np.array([model.genders.index(g) for g in patients["gender"]])
    return band * len(model.genders) + gender


def _prevalence(model: CodeModel, ds) -> tuple[np.ndarray, np.ndarray]:
    """(cells, codes) share of each cell's patients with each code; patients per cell."""
    cell = pd.Series(_cells(model, ds.patients), index=ds.patients.index)
    pos = pd.Series(np.arange(len(model.vocabulary)), index=model.vocabulary)
    out = np.zeros((model.n_cells, len(model.vocabulary)))
    np.add.at(out, (cell.loc[ds.diagnoses[PATIENT_ID]].to_numpy(),
                    pos.loc[ds.diagnoses[CODE]].to_numpy()), 1.0)
    per_cell = np.bincount(cell.to_numpy(), minlength=model.n_cells)
    return out / np.maximum(per_cell, 1)[:, None], per_cell


def test_same_seed_same_data_other_seed_other_data(model: CodeModel) -> None:
    a, b, c = (generate(model, 500, np.random.default_rng(s)) for s in (5, 5, 6))
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != c.fingerprint()


def test_fit_reproduces_the_demo_population_prevalence(demo, model: CodeModel) -> None:
    """Over all cells, the model's prevalence of the demo's 10 most common codes is the
    demo's own (absolute discounting takes < 1 patient from each; 36 % for 401.9)."""
    expected = model.cell_share @ expected_prevalence(model)
    pairs = demo.diagnoses.drop_duplicates([PATIENT_ID, CODE])
    observed = pairs[CODE].value_counts() / demo.n_patients
    pos = {c: i for i, c in enumerate(model.vocabulary)}
    for code, share in observed.head(10).items():
        assert expected[pos[code]] == pytest.approx(share, abs=0.03), code


def test_generated_prevalence_by_cell_tracks_the_fitted_table(model: CodeModel, big) -> None:
    """At n = 20K, each (age band, gender) cell's prevalence of the 20 most common codes is
    the fitted table's within 4.5 standard errors (+0.01 for Rosén's approximation) — and
    the table is not flat: cells differ by far more than that, so an age/gender-blind
    generator would fail here."""
    expected = expected_prevalence(model)
    observed, per_cell = _prevalence(model, big)
    top = np.argsort(-(model.cell_share @ expected))[:20]
    e, o = expected[:, top], observed[:, top]
    se = np.sqrt(e * (1 - e) / per_cell[:, None])
    assert (np.abs(o - e) <= 4.5 * se + 0.01).all()
    spread = o.max(axis=0) - o.min(axis=0)
    assert (spread > 4.5 * se.max(axis=0) + 0.05).sum() >= 10


def test_codes_per_patient_follow_each_cell(model: CodeModel, big) -> None:
    """Mean distinct codes per patient in each cell = the fitted distribution's mean."""
    cell = _cells(model, big.patients)
    n_codes = big.diagnoses.groupby(PATIENT_ID).size().reindex(big.patients.index).to_numpy()
    for g in range(model.n_cells):
        mean = model.count_pmf[g] @ model.count_support[g]
        sd = np.sqrt(model.count_pmf[g] @ (model.count_support[g] - mean) ** 2)
        got = n_codes[cell == g]
        assert abs(got.mean() - mean) <= 4.5 * sd / np.sqrt(len(got))


def test_sparse_cells_back_off_to_their_age_band(demo, model: CodeModel) -> None:
    """A cell with fewer than MIN_CELL demo patients uses its band's patients (both
    genders) for the number of codes per patient."""
    cell = _cells(model, demo.patients.assign(age=demo.patients["age"].astype(int)))
    n_codes = demo.diagnoses.drop_duplicates([PATIENT_ID, CODE]).groupby(PATIENT_ID).size() \
        .reindex(demo.patients.index, fill_value=0).to_numpy()
    sparse = [g for g in range(model.n_cells) if 0 < (cell == g).sum() < MIN_CELL]
    assert sparse  # the demo has such cells (4 and 5 patients under 65)
    for g in sparse:
        band = g // len(model.genders)
        pool = n_codes[(cell // len(model.genders)) == band]
        if len(pool) >= MIN_CELL:
            assert set(model.count_support[g]) == set(pool[pool > 0])


def test_codes_are_hierarchy_nodes_and_the_tail_is_used(model: CodeModel, big) -> None:
    h = icd9_hierarchy()
    assert set(big.distinct_codes()) <= set(h.parent)
    assert not big.diagnoses.duplicated([PATIENT_ID, CODE]).any()
    # Good–Turing: about a quarter of the draws fall outside the demo's codes.
    unseen = ~big.diagnoses[CODE].isin(set(model.vocabulary[:model.seen]))
    assert unseen.mean() == pytest.approx(model.unseen_mass, abs=0.03)
    assert len(big.distinct_codes()) > 5 * model.seen


def test_refuses_a_non_positive_size(model: CodeModel) -> None:
    with pytest.raises(ParameterError):
        generate(model, 0, np.random.default_rng(0))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 150), seed=st.integers(0, 2**32 - 1))
def test_shapes(model: CodeModel, n: int, seed: int) -> None:
    ds = generate(model, n, np.random.default_rng(seed))
    assert ds.n_patients == n and ds.patients.index.is_unique
    assert set(ds.diagnoses[PATIENT_ID]) == set(ds.patients.index)  # everyone has codes
    cell = _cells(model, ds.patients)
    assert (cell >= 0).all()
    n_codes = ds.diagnoses.groupby(PATIENT_ID).size().reindex(ds.patients.index).to_numpy()
    for g in np.unique(cell):
        assert set(n_codes[cell == g]) <= set(model.count_support[g])
