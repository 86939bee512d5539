from collections import Counter

import pandas as pd

from ehr_release.model.dataset import Dataset


def test_views_and_fingerprint():
    ds = Dataset.from_records([["401.9", "250.00", "401.9"], [("272.0", 40), ("272.0", 44)]],
                              pd.DataFrame({"age": [50, 60]}))
    assert ds.code_sets() == [frozenset({"401.9", "250.00"}), frozenset({"272.0"})]
    assert ds.code_multisets()[0] == Counter({"401.9": 2, "250.00": 1})
    assert ds.trajectories()[1] == [("272.0", 40), ("272.0", 44)]
    assert ds.is_longitudinal
    same = Dataset(ds.patients.iloc[::-1], ds.diagnoses.iloc[::-1])
    assert same.fingerprint() == ds.fingerprint()
    other = Dataset.from_records([["401.9"], ["272.0"]], pd.DataFrame({"age": [50, 60]}))
    assert other.fingerprint() != ds.fingerprint()
