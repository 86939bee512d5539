"""The GCCens verifier accepts what GCCens releases and rejects broken releases."""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.gccens import gccens
from ehr_release.algorithms.gccens.release import META_FILE, RECORDS_FILE, release_files
from ehr_release.privacy.gccens import check_kmap

CODES = ["250", "272", "401", "724"]
INFO = {"records": 0, "fingerprint": "x"}


def brute_dis(population, record) -> int:
    return sum(all(p.get(c, 0) >= n for c, n in record.items()) for p in population)


@st.composite
def problems(draw):
    """A small population, a sample drawn from it, k and caps."""
    counts = st.dictionaries(st.sampled_from(CODES), st.integers(1, 4), max_size=4)
    population = [Counter(r) for r in draw(st.lists(counts, min_size=3, max_size=25))]
    chosen = draw(st.lists(st.integers(0, len(population) - 1), min_size=1, max_size=8,
                           unique=True))
    k = draw(st.integers(2, min(6, len(population))))
    caps = draw(st.dictionaries(st.sampled_from([*CODES, "*"]), st.integers(0, 4), max_size=3))
    ids = [f"p{i}" for i in chosen]
    return population, ids, [population[i] for i in chosen], k, caps


def _release(population, ids, sample, k, caps):
    result = gccens(sample, population, k, caps)
    return result, release_files(ids, result, k=k, population=INFO)


def _with_records(files, records):
    """The release with these records, lines in the documented order (by patient_id)."""
    lines = [json.dumps({"patient_id": pid, "codes": rec}) for pid, rec in sorted(records)]
    return {**files, RECORDS_FILE: ("\n".join(lines) + "\n").encode()}


@settings(max_examples=50, deadline=None)
@given(problems())
def test_verifier_accepts_gccens_output_and_kmap_holds(problem):
    population, ids, sample, k, caps = problem
    result, files = _release(population, ids, sample, k, caps)
    assert all(brute_dis(population, r) >= k for r in result.released)
    report = check_kmap(files, ids, sample, population, k, caps, population_info=INFO)
    assert report.holds, report.failures


@settings(max_examples=50, deadline=None)
@given(problems())
def test_verifier_rejects_uncensored_records_below_k(problem):
    population, ids, sample, k, caps = problem
    result, files = _release(population, ids, sample, k, caps)
    capped = [dict(r) for r in result.capped]
    broken = _with_records(files, list(zip(ids, capped, strict=True)))  # skipped the loop
    report = check_kmap(broken, ids, sample, population, k, caps)
    risky = any(brute_dis(population, r) < k for r in capped)
    assert report.holds is not risky
    if risky:  # below k, and not what GCCens' censoring leaves
        assert [r.name for r in report.failures] == ["k-map", "censoring replayed"]


@settings(max_examples=50, deadline=None)
@given(problems(), st.data())
def test_verifier_rejects_added_instances(problem, data):
    population, ids, sample, k, caps = problem
    result, files = _release(population, ids, sample, k, caps)
    i = data.draw(st.integers(0, len(ids) - 1))
    code = data.draw(st.sampled_from(CODES))
    records = [dict(r) for r in result.released]
    records[i][code] = sample[i].get(code, 0) + 1  # more than the patient ever had
    report = check_kmap(_with_records(files, list(zip(ids, records, strict=True))), ids,
                         sample, population, k, caps)
    assert "censoring only" in {r.name for r in report.failures}


def test_verifier_rejects_caps_missing_patients_and_bad_format():
    population = [Counter({"250": 3})] * 4
    sample = [Counter({"250": 3})]
    result, files = _release(population, ["p1"], sample, 2, {"250": 1})
    assert check_kmap(files, ["p1"], sample, population, 2, {"250": 1}).holds
    over = _with_records(files, [("p1", {"250": 2})])
    failed = {r.name for r in check_kmap(over, ["p1"], sample, population, 2,
                                          {"250": 1}).failures}
    assert failed == {"caps respected", "censoring replayed"}
    gone = _with_records(files, [])
    failed = {r.name for r in check_kmap(gone, ["p1"], sample, population, 2,
                                          {"250": 1}).failures}
    assert failed == {"one record per sample patient"}
    garbage = {**files, RECORDS_FILE: b"{not json\n"}
    report = check_kmap(garbage, ["p1"], sample, population, 2, {"250": 1})
    assert not report.holds and report.failures[0].name == "release format"
    negative = _with_records(files, [("p1", {"250": 0})])
    assert not check_kmap(negative, ["p1"], sample, population, 2, {"250": 1}).holds
    assert not check_kmap({RECORDS_FILE: files[RECORDS_FILE]}, ["p1"], sample, population,
                           2, {"250": 1}).holds


def test_verifier_rejects_published_caps_other_than_the_policy():
    """Sample-derived caps (the sample's codes and maxima) in place of the policy fail."""
    population = [Counter({"250": 3, "272": 1})] * 4
    sample = [Counter({"250": 3, "272": 1})]
    _, files = _release(population, ["p1"], sample, 2, {})
    assert json.loads(files[META_FILE])["caps"] == {}
    leaky = {**files, META_FILE: json.dumps({"k": 2, "caps": {"250": 3, "272": 1},
                                             "population": INFO}).encode()}
    report = check_kmap(leaky, ["p1"], sample, population, 2, {})
    assert [r.name for r in report.failures] == ["parameters only"]


def test_verifier_rejects_release_for_another_population():
    population = [Counter({"250": 1})] * 3
    _, files = _release(population, ["p1"], [Counter({"250": 1})], 2, {})
    meta = json.loads(files[META_FILE])
    assert meta["population"] == INFO
    report = check_kmap(files, ["p1"], [Counter({"250": 1})], population, 2, {},
                         population_info={"records": 3, "fingerprint": "other"})
    assert [r.name for r in report.failures] == ["population"]


def test_kmap_counts_with_many_codes_as_brute_force() -> None:
    """Seventy released codes make the population's profiles too many for one integer
    each; the padded-row grouping that takes over counts as a brute force does."""
    import random

    rng = random.Random(7)
    codes = [f"C{i:02d}" for i in range(70)]
    population = [{c: rng.randint(1, 3) for c in rng.sample(codes, rng.randint(0, 12))}
                  for _ in range(60)]
    ids = [f"p{i}" for i in range(20)]
    sample = population[:20]
    released = [{c: min(n, 2) for c, n in sorted(rec.items())[:6]} for rec in sample]
    files = {"censored.jsonl": "".join(
        json.dumps({"patient_id": pid, "codes": rec}) + "\n"
        for pid, rec in sorted(zip(ids, released, strict=True))).encode(),
        "censoring.json": json.dumps({"k": 1, "caps": {}, "population": {}}).encode()}
    smallest = min(sum(all(p.get(c, 0) >= n for c, n in rec.items()) for p in population)
                   for rec in released)
    report = check_kmap(files, ids, sample, population, 1, {})
    kmap = next(r for r in report.requirements if r.name == "k-map")
    assert kmap.measured.startswith(f"smallest distinguishability {smallest};")
    # k-map holds; the records are not what GCCens leaves (k = 1 censors nothing)
    assert smallest < 20 and [r.name for r in report.failures] == ["censoring replayed"]
