"""The k-map attack audit on GCCens releases: what it exploits and what it never blames."""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.gccens import gccens
from ehr_release.algorithms.gccens.release import META_FILE, RECORDS_FILE, release_files
from ehr_release.privacy.attacks import gccens as attack_module
from ehr_release.privacy.attacks.gccens import attack_kmap, declared_caps
from ehr_release.privacy.gccens import check_kmap

CODES = ["250", "272", "401", "724"]
INFO = {"records": 0, "fingerprint": "x"}


def brute_dis(population, record) -> int:
    return sum(all(p.get(c, 0) >= n for c, n in record.items()) for p in population)


def _lines(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _meta(k, caps, **extra) -> bytes:
    return json.dumps({"k": k, "caps": caps, "population": INFO, **extra}).encode()


def test_attack_imports_neither_algorithms_nor_model_checks():
    tree = ast.parse(Path(attack_module.__file__).read_text())
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(n.startswith("ehr_release.algorithms") for n in names)
    assert not names & {f"ehr_release.privacy.{m}" for m in (
        "disassociation", "kkm", "gccens", "lda", "diffgen", "itemset_counts", "json_lines")}


# Code 100 is held by p1 only. Sample {p1, p3}; GCCens (k=2, caps max) releases {250}, {272}.
POPULATION = [{"100": 1, "250": 1}, {"250": 1}, {"272": 1}, {"272": 1}, {"401": 1}]
SAMPLE_IDS, SAMPLE = ["r1", "r3"], [POPULATION[0], POPULATION[2]]


def _correct_release() -> dict[str, bytes]:
    result = gccens(SAMPLE, POPULATION, 2, {})
    assert result.released == [{"250": 1}, {"272": 1}]
    return release_files(SAMPLE_IDS, result, k=2, population=INFO)


def test_correct_release_passes_with_candidate_sets_of_two():
    report = attack_kmap(_correct_release(), SAMPLE_IDS, SAMPLE, POPULATION, 2, {})
    assert report.passed and report.smallest_candidate_set == 2
    assert report.exhaustive and report.knowledge_sets_tried == len(POPULATION)


def test_finding2_sample_derived_metadata_narrows_a_patient_to_one():
    """The metadata GCCens used to publish: the sample's codes with their maxima."""
    files = _correct_release()
    old = {"k": 2, "initial_caps": {"100": 1, "250": 1, "272": 1},
           "final_caps": {"100": 0, "250": 1, "272": 1}, "population": INFO}
    files[META_FILE] = json.dumps(old).encode()
    report = attack_kmap(files, SAMPLE_IDS, SAMPLE, POPULATION, 2, {})
    # 100 is in the sample → p1 is; p1's only consistent line is {250} → that line is p1
    assert not report.passed and report.smallest_candidate_set == 1
    assert "metadata revealed" in report.measured


def test_a_plain_code_list_in_the_metadata_is_exploited_too():
    files = _correct_release()
    files[META_FILE] = _meta(2, {}, sample_codes=["100", "250", "272"])
    assert attack_kmap(files, SAMPLE_IDS, SAMPLE, POPULATION, 2, {}).smallest_candidate_set == 1


def test_the_declared_caps_policy_is_not_a_hint():
    result = gccens(SAMPLE, POPULATION, 2, {"100": 1, "*": 1})
    files = release_files(SAMPLE_IDS, result, k=2, population=INFO)
    assert json.loads(files[META_FILE])["caps"] == {"100": 1, "*": 1}
    report = attack_kmap(files, SAMPLE_IDS, SAMPLE, POPULATION, 2, declared_caps("100:1,*:1"))
    assert report.passed and report.smallest_candidate_set == 2


def test_per_line_scalar_field_is_exploited():
    lines = [{"patient_id": "r1", "codes": {"250": 1}, "n": 2},   # distinct codes of p1
             {"patient_id": "r3", "codes": {"272": 1}, "n": 1}]
    files = {RECORDS_FILE: _lines(lines), META_FILE: _meta(2, {})}
    report = attack_kmap(files, SAMPLE_IDS, SAMPLE, POPULATION, 2, {})
    assert not report.passed and report.smallest_candidate_set == 1
    assert "per-line fields" in report.measured


def test_line_order_following_the_extract_is_exploited():
    population = [{"250": 1}, {"272": 1}, {"250": 1}, {"272": 1}]
    ids = ["z1", "y2", "x3", "w4"]  # extract order = population order, ids not sorted
    lines = [{"patient_id": pid, "codes": rec} for pid, rec in zip(ids, population, strict=True)]
    files = {RECORDS_FILE: _lines(lines), META_FILE: _meta(2, {})}
    report = attack_kmap(files, ids, population, population, 2, {})
    assert not report.passed and report.smallest_candidate_set == 1
    # the same lines in pseudonym order carry nothing
    files[RECORDS_FILE] = _lines(sorted(lines, key=lambda x: x["patient_id"]))
    assert attack_kmap(files, ids, population, population, 2, {}).passed


def test_cross_record_matching_is_reported_not_failed():
    """k-map holds (every line in ≥ 2 records) yet matching pins the third line."""
    population = [{"250": 1, "272": 1}, {"250": 1, "272": 1}, {"250": 1}]
    ids = ["a", "b", "c"]
    files = release_files(ids, gccens(population, population, 2, {}), k=2, population=INFO)
    assert check_kmap(files, ids, population, population, 2, {}).holds
    report = attack_kmap(files, ids, population, population, 2, {})
    assert report.passed and report.smallest_candidate_set == 2
    assert report.measured.endswith("narrows the smallest to 1")


def test_report_names_no_patient_and_no_code():
    files = _correct_release()
    report = attack_kmap(files, SAMPLE_IDS, SAMPLE, POPULATION, 2, {})
    text = json.dumps(report.to_dict())
    assert not any(v in text for v in [*SAMPLE_IDS, "100", "250", "272", "401"])


def test_unreadable_release_fails():
    files = {RECORDS_FILE: b"{not json\n", META_FILE: _meta(2, {})}
    report = attack_kmap(files, SAMPLE_IDS, SAMPLE, POPULATION, 2, {})
    assert not report.passed and report.smallest_candidate_set is None


# ------------------------------------------------------------------ properties
@st.composite
def problems(draw):
    """A small population, a sample drawn from it, k and caps."""
    counts = st.dictionaries(st.sampled_from(CODES), st.integers(1, 4), max_size=4)
    population = [dict(Counter(r)) for r in draw(st.lists(counts, min_size=3, max_size=25))]
    chosen = draw(st.lists(st.integers(0, len(population) - 1), min_size=1, max_size=8,
                           unique=True))
    k = draw(st.integers(2, min(6, len(population))))
    caps = draw(st.dictionaries(st.sampled_from([*CODES, "*"]), st.integers(0, 4), max_size=3))
    ids = [f"R{(7919 * i) % 1000:03d}" for i in chosen]  # pseudonym-like, unsorted
    return population, ids, [population[i] for i in chosen], k, caps


def _release(problem):
    population, ids, sample, k, caps = problem
    result = gccens(sample, population, k, caps)
    return result, release_files(ids, result, k=k, population=INFO)


@settings(max_examples=60, deadline=None)
@given(problems())
def test_attack_never_fails_a_correct_release(problem):
    population, ids, sample, k, caps = problem
    result, files = _release(problem)
    assert check_kmap(files, ids, sample, population, k, caps).holds
    report = attack_kmap(files, ids, sample, population, k, caps)
    assert report.passed, report
    assert report.smallest_candidate_set == min(brute_dis(population, r) for r in result.released)


@settings(max_examples=60, deadline=None)
@given(problems(), st.data())
def test_attack_finds_a_record_left_uncensored(problem, data):
    population, ids, sample, k, caps = problem
    result, files = _release(problem)
    risky = [i for i, r in enumerate(result.capped) if brute_dis(population, r) < k]
    assume(risky)
    i = data.draw(st.sampled_from(risky))
    records = {pid: rec for pid, rec in zip(ids, result.released, strict=True)}
    records[ids[i]] = result.capped[i]  # the algorithm skipped this patient
    lines = [{"patient_id": pid, "codes": records[pid]} for pid in sorted(records)]
    files = {**files, RECORDS_FILE: _lines(lines)}
    report = attack_kmap(files, ids, sample, population, k, caps)
    assert not report.passed
    assert report.smallest_candidate_set == brute_dis(population, result.capped[i]) < k


@settings(max_examples=60, deadline=None)
@given(problems())
def test_attack_finds_a_per_line_field_that_singles_one_out(problem):
    population, ids, sample, k, caps = problem
    assume(any(brute_dis(population, r) < k for r in sample))
    result, files = _release(problem)
    original = dict(zip(ids, sample, strict=True))
    lines = [json.loads(x) for x in files[RECORDS_FILE].decode().splitlines()]
    for line in lines:
        line["before"] = original[line["patient_id"]]  # the uncensored record
    report = attack_kmap({**files, RECORDS_FILE: _lines(lines)}, ids, sample, population, k,
                         caps)
    assert not report.passed
    assert report.smallest_candidate_set == min(brute_dis(population, r) for r in sample)
