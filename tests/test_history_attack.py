"""The history attack audit (issue 31): releases of the same patients, differenced.

Real releases of every syntactic family: E and E minus one patient each pass alone, and
together give the patient's codes away (the audit must fail); a release against itself, or
against a release of other patients, must pass. Hypothesis properties plant a code that only
the removed patients hold and check that the audit always finds it, and that a disjoint
history never fails. The report never quotes a code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.model.dataset import PATIENT_ID, Dataset
from ehr_release.privacy.attacks.history import (
    FAMILIES,
    HeldRelease,
    Overlap,
    TermCounts,
    Unreadable,
    attack_history,
    published_terms,
)
from ehr_release.samples.sample import generate_sample, write_sample

from .conftest import SHARED_DATA

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MIMIC = SHARED_DATA / "mimic3-demo"
K = 5


def _without(ds: Dataset, ids: list[str]) -> Dataset:
    gone = set(ids)
    keep = [p for p in ds.patient_ids if p not in gone]
    diagnoses = ds.diagnoses[ds.diagnoses[PATIENT_ID].isin(keep)].reset_index(drop=True)
    return Dataset(ds.patients.loc[keep], diagnoses, source=ds.source)


def _release(name: str, ds: Dataset, given: dict[str, str], label: str) -> HeldRelease:
    entry = registry.get(name)
    files = entry.anonymize(ds, entry.parse(given), np.random.default_rng(7))
    return HeldRelease(label=label, algorithm=name, files=files, k=int(given.get("k", K)))


# --------------------------------------------------------------------------- real releases
@dataclass(frozen=True)
class Family:
    """An extract E, a disjoint extract of other patients, and the release parameters."""

    extract: Callable[[Path], Dataset]
    other: Callable[[Path], Dataset]
    params: Callable[[Path], dict[str, str]]


def _mimic() -> Dataset:
    if not MIMIC.is_dir():
        pytest.skip(f"needs the MIMIC-III demo in {SHARED_DATA}")
    from ehr_release.ingest import read_dataset

    return read_dataset(MIMIC)


def _population(tmp: Path) -> Dataset:
    population = generate_sample(300, seed=13)
    write_sample(population, tmp / "population.csv")
    return population


def _artuc_params(_tmp: Path) -> dict[str, str]:
    return {"config": str(EXAMPLES / "artuc-mimic" / "config.yaml"), "delta": "0.4",
            "m": "2", "k": str(K), "seed": "7"}


def _kkm() -> Family:
    # E: the demo's first 50 patients; the other extract: its last 50.
    return Family(lambda _t: _without(_mimic(), _mimic().patient_ids[50:]),
                  lambda _t: _without(_mimic(), _mimic().patient_ids[:50]), _artuc_params)


def _lda_params(_tmp: Path) -> dict[str, str]:
    return {"k": str(K)}


FAMILY_CASES: dict[str, Family] = {
    "disassociation": Family(lambda _t: generate_sample(150, seed=11),
                             lambda _t: generate_sample(150, seed=12),
                             lambda _t: {"k": str(K), "m": "2", "seed": "7"}),
    "artuc": _kkm(), "artuc-baseline": _kkm(), "artuc-unconstrained": _kkm(), "rmr": _kkm(),
    "gccens": Family(lambda t: _without(_population(t), _population(t).patient_ids[120:]),
                     lambda t: _without(_population(t), _population(t).patient_ids[:150]),
                     lambda t: {"k": str(K), "population": str(t / "population.csv")}),
    "lda": Family(lambda _t: generate_sample(120, seed=5, longitudinal=True),
                  lambda _t: generate_sample(100, seed=6, longitudinal=True), _lda_params),
    "lda-baseline": Family(lambda _t: generate_sample(120, seed=5, longitudinal=True),
                           lambda _t: generate_sample(100, seed=6, longitudinal=True),
                           _lda_params),
}


def test_every_family_the_audit_reads_has_a_case() -> None:
    assert set(FAMILY_CASES) == set(FAMILIES)
    assert set(FAMILIES) <= set(registry.names())


def _victim(release: HeldRelease, ds: Dataset) -> str:
    """A patient with the most codes — and, for GCCens, one whose line keeps a code after
    censoring (a patient whose line is empty publishes nothing to give away)."""
    order = sorted(ds.patient_ids, key=lambda p: (-len(ds.code_sets()[ds.patient_ids.index(p)]),
                                                  p))
    if release.algorithm != "gccens":
        return order[0]
    lines = [json.loads(x) for x in release.files["censored.jsonl"].splitlines()]
    shown = {line["patient_id"] for line in lines if line["codes"]}
    return next(p for p in order if p in shown)


@pytest.mark.parametrize("name", sorted(FAMILY_CASES))
def test_a_release_and_the_same_minus_one_patient_give_the_patient_away(
        name: str, tmp_path: Path) -> None:
    case = FAMILY_CASES[name]
    given = case.params(tmp_path)
    extract = case.extract(tmp_path)
    n = extract.n_patients
    full = _release(name, extract, given, "run-E")
    minus = _release(name, _without(extract, [_victim(full, extract)]), given, "run-E-1")

    removed = attack_history(minus, [(full, Overlap(shared=n - 1, only_current=0,
                                                    only_earlier=1))])
    assert not removed.passed and removed.smallest_candidate_set == 1
    assert "run-E" in removed.measured
    # the other way round: the patient was added since the earlier release
    added = attack_history(full, [(minus, Overlap(shared=n - 1, only_current=1,
                                                  only_earlier=0))])
    assert not added.passed and added.smallest_candidate_set == 1

    itself = attack_history(full, [(full, Overlap(shared=n, only_current=0, only_earlier=0))])
    assert itself.passed and itself.smallest_candidate_set is None

    other_extract = case.other(tmp_path)
    other = _release(name, other_extract, given, "run-other")
    disjoint = attack_history(full, [(other, Overlap(0, n, other_extract.n_patients))])
    assert disjoint.passed, disjoint.measured
    assert disjoint.smallest_candidate_set is not None and disjoint.smallest_candidate_set >= K
    # all three at once: the one differencing pair fails the whole history
    every = attack_history(minus, [(other, Overlap(0, n - 1, other_extract.n_patients)),
                                   (full, Overlap(n - 1, 0, 1)),
                                   (minus, Overlap(n - 1, 0, 0))])
    assert not every.passed and every.knowledge_sets_tried == 3


def test_a_group_of_k_removed_patients_is_not_given_away(tmp_path: Path) -> None:
    """Terms attributed to ≥ k patients tell no more than a k-anonymous release does; k − 1
    removed patients fail."""
    extract = generate_sample(150, seed=11)
    given = {"k": str(K), "m": "2", "seed": "7"}
    n = extract.n_patients
    full = _release("disassociation", extract, given, "run-E")
    for removed, passes in ((K, True), (K - 1, False)):
        part = _release("disassociation", _without(extract, extract.patient_ids[:removed]),
                        given, f"run-minus-{removed}")
        report = attack_history(part, [(full, Overlap(n - removed, 0, removed))])
        assert report.passed is passes, report.measured
        assert report.smallest_candidate_set == removed


def test_the_threshold_is_the_larger_k_of_the_pair(tmp_path: Path) -> None:
    extract = generate_sample(150, seed=11)
    n = extract.n_patients
    full = _release("disassociation", extract, {"k": "8", "m": "2", "seed": "7"}, "run-E")
    part = _release("disassociation", _without(extract, extract.patient_ids[:6]),
                    {"k": "5", "m": "2", "seed": "7"}, "run-part")
    report = attack_history(part, [(full, Overlap(n - 6, 0, 6))])
    assert not report.passed and report.threshold == 8


def test_term_counts_are_read_once_and_taken_from_the_cache() -> None:
    extract = generate_sample(150, seed=11)
    given = {"k": str(K), "m": "2", "seed": "7"}
    full = _release("disassociation", extract, given, "run-E")
    minus = _release("disassociation", _without(extract, extract.patient_ids[:1]), given,
                     "run-E-1")
    cache: dict[str, Any] = {}
    first = attack_history(minus, [(full, Overlap(149, 0, 1))], terms=cache)
    assert set(cache) == {"run-E", "run-E-1"} and cache["run-E"] == published_terms(full)
    # a cached label is not read again: the bytes may even be gone
    gone = HeldRelease("run-E", "disassociation", {}, K)
    second = attack_history(minus, [(gone, Overlap(149, 0, 1))], terms=cache)
    assert (first.passed, first.measured) == (second.passed, second.measured) == (
        False, first.measured)
    # plain dictionaries serve as well as the reader's own mapping
    plain = {label: dict(t) for label, t in cache.items()}
    assert attack_history(minus, [(gone, Overlap(149, 0, 1))], terms=plain).measured \
        == first.measured


def test_an_unreadable_release_fails_the_audit_naming_no_value() -> None:
    good = HeldRelease("run-a", "disassociation",
                       _release("disassociation", generate_sample(60, seed=1),
                                {"k": str(K), "m": "2", "seed": "7"}, "x").files, K)
    bad = HeldRelease("run-b", "disassociation", {"release.parquet": b"401.9 not parquet"}, K)
    report = attack_history(good, [(bad, Overlap(60, 0, 0)), (bad, Overlap(0, 60, 60))])
    assert not report.passed and "401.9" not in report.measured
    with pytest.raises(Unreadable):
        published_terms(bad)
    with pytest.raises(ValueError, match="diffgen"):
        published_terms(HeldRelease("run-c", "diffgen", {}, K))
    with pytest.raises(ValueError, match="only_earlier"):
        Overlap(1, 0, -1)


def test_leaf_codes_of_generalized_terms_come_from_the_hierarchy() -> None:
    """An LDA chapter covers its leaf codes: a release showing only one leaf of it leaves
    the others vanished, attributed to the patient removed."""
    def lda(lines: list[list[tuple[str, list[int]]]], label: str) -> HeldRelease:
        body = "".join(json.dumps({"patient_id": f"p{i}", "trajectory": t}) + "\n"
                       for i, t in enumerate(lines))
        return HeldRelease(label, "lda", {"trajectories.jsonl": body.encode()}, 2)

    chapter = lda([[("390-459", [1, 128])]] * 3, "run-chapter")
    one_leaf = lda([[("401.9", [1, 128])]] * 2, "run-leaf")
    terms = published_terms(chapter)
    assert terms.covered > {"401.9", "428.0"}
    assert not attack_history(one_leaf, [(chapter, Overlap(2, 0, 1))]).passed
    # the reverse adds nothing new: 401.9 was covered by the chapter already, and the chapter
    # shows more often in the current release (3 > 0), attributed to the one added patient
    assert not attack_history(chapter, [(one_leaf, Overlap(2, 1, 0))]).passed
    same = lda([[("390-459", [1, 128])]] * 2, "run-same")
    assert attack_history(same, [(chapter, Overlap(2, 0, 1))]).passed is False
    assert attack_history(chapter, [(same, Overlap(2, 1, 0))]).passed is False
    assert attack_history(chapter, [(chapter, Overlap(2, 1, 1))]).passed


# --------------------------------------------------------------------------- properties
CODES = ["401.9", "428.0", "427.31", "414.01", "250.00", "584.9", "518.81", "496"]
PLANTED = "038.9"  # a code nobody but the planted patients holds
KKM_CONFIG = {
    "attributes": {
        "age": {"type": "numerical", "domain": [0, 60], "weight": 0.5},
        "sex": {"type": "categorical", "hierarchy": {"All": ["F", "M"]}, "weight": 0.5}},
    "codes": {"hierarchy": "icd9"},
    "constraints": [{"name": "one", "codes": "all"}],
}

patients = st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["F", "M"]),
                              st.sets(st.sampled_from(CODES), min_size=1, max_size=4)),
                    min_size=12, max_size=30)


def _planted(rows: list[tuple[int, str, set[str]]], planted: int, prefix: str) -> Dataset:
    """``rows`` as patients; the first ``planted`` of them also hold :data:`PLANTED`."""
    demo = pd.DataFrame([r[:2] for r in rows], columns=["age", "sex"])
    codes = [sorted(r[2] | ({PLANTED} if i < planted else set())) for i, r in enumerate(rows)]
    return Dataset.from_records(codes, demo,
                                patient_ids=[f"{prefix}{i:03d}" for i in range(len(rows))])


@pytest.fixture(scope="module")
def kkm_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("history") / "config.yaml"
    path.write_text(yaml.safe_dump(KKM_CONFIG))
    return str(path)


def _params(name: str, k: int, config: str) -> dict[str, str]:
    if name == "disassociation":
        return {"k": str(k), "m": "2", "seed": "3"}
    return {"k": str(k), "m": "2", "delta": "1.0", "epsilon": "1000", "config": config,
            "seed": "3", "codes": "set"}


PROPERTY = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@pytest.mark.parametrize("name", ["disassociation", "rmr"])
@PROPERTY
@given(rows=patients, k=st.integers(2, 4), data=st.data())
def test_every_planted_differencing_pair_is_found(name: str, kkm_config: str, rows, k: int,
                                                  data: st.DataObject) -> None:
    """Remove 1 … k−1 patients holding a code nobody else holds: when the earlier release
    published that code at all, the audit fails, in both directions."""
    removed = data.draw(st.integers(1, k - 1), label="removed")
    extract = _planted(rows, removed, "p")
    given_ = _params(name, k, kkm_config)
    full = _release(name, extract, given_, "run-E")
    part = _release(name, _without(extract, extract.patient_ids[:removed]), given_, "run-P")
    n = extract.n_patients
    if PLANTED not in published_terms(full).covered:
        return  # suppressed in E: nothing of it was published to give away
    assert PLANTED not in published_terms(part).covered
    report = attack_history(part, [(full, Overlap(n - removed, 0, removed))])
    assert not report.passed and report.smallest_candidate_set == removed
    back = attack_history(full, [(part, Overlap(n - removed, removed, 0))])
    assert not back.passed and back.smallest_candidate_set == removed


def test_disassociation_always_publishes_the_planted_code(kkm_config: str) -> None:
    """So the property above is never vacuous for disassociation (no suppression)."""
    rows = [(20 + i, "F", {CODES[i % len(CODES)]}) for i in range(15)]
    full = _release("disassociation", _planted(rows, 1, "p"),
                    _params("disassociation", 4, kkm_config), "run-E")
    assert PLANTED in published_terms(full).covered


@pytest.mark.parametrize("name", ["disassociation", "rmr"])
@PROPERTY
@given(first=patients, second=patients, k=st.integers(2, 4), planted=st.integers(0, 3))
def test_a_disjoint_history_never_fails(name: str, kkm_config: str, first, second, k: int,
                                        planted: int) -> None:
    a = _planted(first, planted, "a")
    b = _planted(second, 0, "b")
    given_ = _params(name, k, kkm_config)
    current, earlier = _release(name, a, given_, "run-A"), _release(name, b, given_, "run-B")
    report = attack_history(current, [(earlier, Overlap(0, a.n_patients, b.n_patients))])
    assert report.passed, report.measured
    assert attack_history(current, [(current, Overlap(a.n_patients, 0, 0))]).passed


# --------------------------------------------------------------------------- no value stored
def test_no_stored_field_of_the_report_quotes_a_code() -> None:
    extract = generate_sample(150, seed=11)
    given = {"k": str(K), "m": "2", "seed": "7"}
    full = _release("disassociation", extract, given, "run-E")
    minus = _release("disassociation", _without(extract, extract.patient_ids[:2]), given,
                     "run-E-2")
    failed = attack_history(minus, [(full, Overlap(148, 0, 2))])
    passed = attack_history(full, [(full, Overlap(150, 0, 0))])
    assert not failed.passed and passed.passed
    codes = set(extract.distinct_codes()) | {c for t in published_terms(full) for c in t}
    values = {str(v) for v in extract.patients.to_numpy().ravel().tolist() if len(str(v)) > 3}
    for report in (failed, passed):
        for copy in (report, report.stored()):
            text = json.dumps([copy.to_dict(), copy.requirement().stored().evidence,
                               copy.requirement().stored().measured,
                               copy.requirement().stored().required], default=str)
            tokens = set(re.findall(r"[\w.@=\-]+", text))  # "0.00511 s" holds no code 511
            assert not codes & tokens, "a code in the report"
            assert not {v for v in values if v in text}, "a demographic value in the report"
            assert "@" not in text, "a demographic term in the report"
    assert "smallest group 2" in failed.measured


def test_term_counts_of_a_disassociated_release_are_its_rows() -> None:
    """Every published occurrence counts once: record and shared chunks, each item chunk."""
    import io

    import pyarrow.parquet as pq

    files = _release("disassociation", generate_sample(150, seed=11),
                     {"k": str(K), "m": "2", "seed": "7"}, "x").files
    table = pq.read_table(io.BytesIO(files["release.parquet"])).to_pandas()
    terms = published_terms(HeldRelease("x", "disassociation", files, K))
    assert isinstance(terms, TermCounts)
    assert sum(terms.values()) == int(table["code"].notna().sum())
    assert len(terms) == table["code"].nunique()


def test_a_record_showing_one_leaf_set_twice_counts_once() -> None:
    """Two code-table entries covering the same leaf codes (a category and the category
    with one of its codes) on one record: one occurrence of that term, not two."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    def parquet(table: pa.Table) -> bytes:
        out = io.BytesIO()
        pq.write_table(table, out)
        return out.getvalue()

    codes = pa.table({"id": [0, 1, 2], "codes": [["401"], ["401", "401.9"], ["428.0"]]})
    records = pa.table({"cluster": ["C1", "C1", "C1"], "age": [[20.0, 30.0]] * 3,
                        "generalized_codes": [[0, 1], [0, 2], [2]]})
    files = {"generalized_codes.parquet": parquet(codes), "records.parquet": parquet(records)}
    terms = published_terms(HeldRelease("x", "rmr", files, 2))
    hypertension = frozenset({"401.0", "401.1", "401.9"})
    assert terms == {hypertension: 2, frozenset({"428.0"}): 2, frozenset({"@age=[20.0, 30.0]"}): 3}


@pytest.mark.parametrize("algorithm, files", [
    ("lda", {"trajectories.jsonl": b'{"patient_id": "p1", "codes": {"401.9": 1}}\n'}),
    ("lda", {"trajectories.jsonl": b'{"patient_id": "p1", "trajectory": [["401.9"]]}\n'}),
    ("gccens", {"censored.jsonl": b'{"patient_id": "p1", "trajectory": []}\n'}),
    ("gccens", {"censored.jsonl": b'{"patient_id": "p1", "codes": {"401.9": 1}\n'}),
    ("artuc", {"records.parquet": b"PAR1"}),
    ("disassociation", {}),
])
def test_each_reader_refuses_what_is_not_its_format(algorithm: str,
                                                    files: dict[str, bytes]) -> None:
    with pytest.raises(Unreadable) as refused:
        published_terms(HeldRelease("x", algorithm, files, 2))
    assert "401.9" not in str(refused.value)
