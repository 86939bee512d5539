"""The patients' record texts behind the history links are the same, whichever way the codes
are joined (``history.linkage.joined_codes``).

Why it matters: the content hash of every earlier release's patients is stored
(``storage.links``) and compared with each new extract's. The join per sorted slice replaced
``groupby(...).agg(",".join)`` for speed; a single changed character would unlink every
patient from their earlier releases — the history check would then pass a differencing pair.
The group-by is kept here as the oracle.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.history.linkage import HASH_BYTES, _records, joined_codes, link_patients
from ehr_release.ingest.readers import read_dataset
from ehr_release.model.dataset import CODE, PATIENT_ID
from ehr_release.samples.sample import generate_sample

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "data"
KEY = b"k" * 32


def _oracle(diagnoses: pd.DataFrame) -> pd.Series:
    ordered = diagnoses.sort_values([PATIENT_ID, CODE], kind="stable")
    return ordered.groupby(PATIENT_ID, sort=False)[CODE].agg(",".join)


def _same(diagnoses: pd.DataFrame, index: pd.Index) -> None:
    ours = joined_codes(diagnoses).reindex(index).fillna("")
    theirs = _oracle(diagnoses).reindex(index).fillna("")
    assert ours.tolist() == theirs.tolist()


codes = st.sampled_from(["250.00", "401.9", "V45.81", "E11.9", "I10", "428.0", "038"])


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 12), codes), max_size=60),
       as_text=st.booleans())
def test_the_slices_join_as_the_group_by_did(rows, as_text: bool) -> None:
    """Any order, repeated codes, patients without diagnoses, integer or text ids."""
    ids = [f"p{i}" if as_text else i for i, _ in rows]
    diagnoses = pd.DataFrame({PATIENT_ID: pd.Series(ids, dtype=object if as_text else "Int64"),
                              CODE: pd.Series([c for _, c in rows], dtype=object)})
    everyone = pd.Index([f"p{i}" if as_text else i for i in range(14)])
    _same(diagnoses, everyone)


def test_rows_without_an_id_are_left_out_as_the_group_by_left_them() -> None:
    diagnoses = pd.DataFrame({PATIENT_ID: pd.Series([1, None, 1, 2], dtype="Int64"),
                              CODE: ["401.9", "250.00", "038", "I10"]})
    _same(diagnoses, pd.Index([1, 2, 3]))


def test_real_extracts_give_the_same_texts() -> None:
    for dataset in (generate_sample(300, seed=3),
                    read_dataset(EXAMPLES / "mimic3-demo"),
                    read_dataset(EXAMPLES / "sample-icd10" / "patients.csv")):
        _same(dataset.diagnoses, dataset.patients.index)
        assert len(link_patients(dataset, "default", KEY).contents) == dataset.n_patients


def test_the_hashes_are_the_plain_hmacs_of_id_and_record() -> None:
    """Each stored hash is HMAC-SHA256(key, domain + value), truncated, computed here one at a
    time with ``hmac.new`` (the stage copies one keyed state instead): a different digest
    would unlink every patient from their earlier releases."""
    dataset = generate_sample(40, seed=5)
    ids, contents = link_patients(dataset, "clinic-a", KEY).to_bytes()  # as stored
    expected_ids, expected_contents = b"", b""
    for pid, text in zip(dataset.patients.index, _records(dataset), strict=True):
        expected_ids += hmac.new(KEY, b"ehr_release.link.id\0clinic-a\0" + str(pid).encode(),
                                 hashlib.sha256).digest()[:HASH_BYTES]
        expected_contents += hmac.new(KEY, b"ehr_release.link.content\0" + text.encode(),
                                      hashlib.sha256).digest()[:HASH_BYTES]
    assert ids == expected_ids
    assert contents == expected_contents
