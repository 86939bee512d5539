"""The history check reads an ICD-10-CM extract's releases with the ICD-10-CM hierarchy
(issue 35): the run's stored schema names its code system, and the differencing attack
expands published nodes to that hierarchy's leaves."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ehr_release import registry
from ehr_release.history import checks
from ehr_release.history.linkage import link_patients
from ehr_release.model.dataset import Dataset
from ehr_release.model.hierarchy import code_hierarchy
from ehr_release.samples.sample import generate_sample
from ehr_release.storage import runs
from ehr_release.storage.models import DatasetRecord
from tests.test_history_checks import KEY, _minus, _park


@pytest.fixture(scope="module")
def extract() -> Dataset:
    return generate_sample(150, seed=21, longitudinal=True, code_system="icd10")


def _lda(dataset: Dataset) -> dict[str, bytes]:
    entry = registry.get("lda")  # no seed: LDA draws nothing at random
    return entry.anonymize(dataset, entry.parse({"k": "5"}), np.random.default_rng(7))


def _register(dataset: Dataset) -> str:
    record = DatasetRecord(fingerprint=dataset.fingerprint(), rows=dataset.n_patients,
                           codes=len(dataset.diagnoses),
                           columns_json=json.dumps(dataset.schema()), source="x")
    return runs.create_run(run_id=runs.new_run_id(), dataset=record, requester="steward",
                           algorithm="lda", parameters={"k": "5"}, out_dir="/tmp").id


def test_the_run_code_system_chooses_the_hierarchy(ehr_home, extract) -> None:
    run_id = _register(extract)
    assert checks._code_hierarchy(run_id, None) is code_hierarchy("icd10")
    assert checks._code_hierarchy("rel-" + "0" * 32, None) is code_hierarchy("icd9")


def test_icd10_lda_minus_one_patient_is_caught(ehr_home, extract) -> None:
    """E published, then E minus one patient: the pair differs by one patient (< k), and
    the attack, reading both releases over ICD-10-CM, must refuse the second."""
    _park("lda", extract, {"k": "5"}, _lda(extract))
    smaller = _minus(extract)
    smaller = Dataset(smaller.patients, smaller.diagnoses, code_system="icd10")
    run_id = _register(smaller)
    entry = registry.get("lda")
    verdict = checks.check_history(run_id, "lda", entry.parse({"k": "5"}),
                                   _lda(smaller),
                                   link_patients(smaller, "default", KEY))
    assert verdict is not None and verdict.differencing and not verdict.holds
