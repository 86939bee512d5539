"""The sample generator: deterministic, hierarchy-valid, skewed, correlated, readable."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ehr_release.core.errors import ParameterError
from ehr_release.ingest.readers import read_dataset
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.samples.sample import CLASS_COLUMN, generate_sample, write_sample


def test_same_seed_same_data_other_seed_other_data() -> None:
    a, b, c = (generate_sample(300, seed=s) for s in (7, 7, 8))
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != c.fingerprint()
    assert a.n_patients == 300


def test_codes_are_hierarchy_nodes_and_demographics_plausible() -> None:
    ds = generate_sample(2000, seed=1)
    h = icd9_hierarchy()
    assert set(ds.distinct_codes()) <= set(h.parent)
    assert ds.patients["age"].between(18, 90).all()
    assert set(ds.patients["gender"]) == {"M", "F"}
    per_patient = ds.diagnoses.groupby("patient_id").size()
    assert per_patient.min() >= 1
    assert 5 <= per_patient.mean() <= 25
    death_rate = ds.patients[CLASS_COLUMN].mean()
    assert 0.06 <= death_rate <= 0.14


def test_code_frequencies_are_zipf_like() -> None:
    ds = generate_sample(5000, seed=2)
    counts = np.array(sorted(Counter(ds.diagnoses["code"]).values(), reverse=True))
    # A few codes in a large share of records, a long tail of rare ones.
    assert counts[0] > 0.15 * ds.n_patients
    assert np.median(counts) < 0.01 * ds.n_patients
    assert counts[:20].sum() > 0.3 * counts.sum()


def test_comorbidities_co_occur() -> None:
    ds = generate_sample(5000, seed=3)
    sets = ds.code_sets()
    diabetic = [s for s in sets if any(c.startswith("250.") for c in s)]
    p_htn = np.mean(["401.9" in s for s in sets])
    p_htn_given_diabetes = np.mean(["401.9" in s for s in diabetic])
    assert len(diabetic) > 100
    assert p_htn_given_diabetes > p_htn + 0.1


def test_longitudinal_ages_lie_within_each_life() -> None:
    ds = generate_sample(500, seed=4, longitudinal=True)
    assert ds.is_longitudinal
    merged = ds.diagnoses.join(ds.patients["age"].rename("now"), on="patient_id")
    assert (merged["age"] >= 1).all()
    assert (merged["age"] <= merged["now"]).all()
    # Chronic codes recur at different ages for some patients.
    repeats = ds.diagnoses.groupby(["patient_id", "code"]).size()
    assert (repeats > 1).any()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("longitudinal", [False, True])
def test_written_sample_reads_back_identically(tmp_path, suffix: str,
                                               longitudinal: bool) -> None:
    ds = generate_sample(200, seed=5, longitudinal=longitudinal)
    path = write_sample(ds, tmp_path / f"sample{suffix}")
    back = read_dataset(path, class_column=CLASS_COLUMN)
    assert back.patient_ids == ds.patient_ids
    assert back.code_multisets() == ds.code_multisets()
    if longitudinal:
        assert back.trajectories() == ds.trajectories()
    assert back.patients["gender"].tolist() == ds.patients["gender"].tolist()


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "10"])
def test_bad_size_is_refused(bad) -> None:
    with pytest.raises(ParameterError, match="n_patients"):
        generate_sample(bad)


def test_unknown_output_format_is_refused(tmp_path) -> None:
    with pytest.raises(ParameterError, match="path"):
        write_sample(generate_sample(10), tmp_path / "x.xlsx")
