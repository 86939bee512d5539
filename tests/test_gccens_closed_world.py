"""GCCens releases are closed-world and publish nothing derived from the sample (issue 14).

Finding 2: ``censoring.json`` listed every code of the sample (and, with caps=max, each
code's largest count in the sample). An attacker holding the population learns from it who
is in the sample — which k-map assumes they cannot know — and here that narrows a patient to
one population record although every released record is contained in ≥ k of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ehr_release.governance.pseudonyms import pseudonymize_records, pseudonymizer
from ehr_release.model.dataset import Dataset
from ehr_release.registry.gccens import ENTRY
from ehr_release.release.verification import attack_release, verify_release
from ehr_release.samples.sample import write_sample

# Code 100 is held by p1 only; 250 by p1 and p2; 272 by p3 and p4. Sample {p1, p3}, k = 2:
# p1's {100, 250} has dis 1, GCCens censors 100 (tie with 250, lowest code first) → {250}.
POPULATION = [["100", "250"], ["250"], ["272"], ["272"], ["401"]]
IDS = [f"p{i}" for i in range(1, 6)]
RID = "gccens-closed-world"


@pytest.fixture
def population_file(tmp_path: Path) -> Path:
    return write_sample(Dataset.from_records(POPULATION, patient_ids=IDS),
                        tmp_path / "population.csv")


def _release(population_file: Path, caps: str = "max"):
    entry = ENTRY
    params = entry.parse({"k": "2", "population": str(population_file), "caps": caps})
    sample = Dataset.from_records([POPULATION[0], POPULATION[2]], patient_ids=["p1", "p3"])
    files = entry.anonymize(sample, params, None)
    # as the flow publishes it: source ids replaced by this release's pseudonyms
    files["censored.jsonl"] = pseudonymize_records(files["censored.jsonl"], pseudonymizer(RID))
    return entry, params, sample, files


def test_finding2_release_publishes_nothing_derived_from_the_sample(population_file):
    """The metadata holds the parameters (k, caps policy) and the population's identity only."""
    entry, params, sample, files = _release(population_file)
    meta = json.loads(files["censoring.json"])
    assert set(meta) == {"k", "caps", "population"}
    assert meta["k"] == 2 and meta["caps"] == {}  # 'max' is a policy, not the sample's maxima
    assert meta["population"]["records"] == len(POPULATION)
    # the censored-away code 100 (only p1 holds it) appears nowhere in the release
    assert all(b'"100"' not in data for data in files.values())


def test_finding2_attack_finds_no_membership_leak(population_file):
    entry, params, sample, files = _release(population_file)
    report = verify_release(entry, files, sample, params, RID)
    assert report.holds, report.failures
    attack = attack_release(entry, files, sample, params, RID)
    assert attack.passed, attack
    assert attack.smallest_candidate_set >= 2


def test_finding2_policy_caps_are_published_as_given(population_file):
    entry, params, sample, files = _release(population_file, caps="250:1,*:0")
    assert json.loads(files["censoring.json"])["caps"] == {"250": 1, "*": 0}
    assert verify_release(entry, files, sample, params, RID).holds


def test_old_sample_derived_metadata_fails_closed_world(population_file):
    entry, params, sample, files = _release(population_file)
    meta = json.loads(files["censoring.json"])
    old = {**meta, "initial_caps": {"100": 1, "250": 1, "272": 1},
           "final_caps": {"100": 0, "250": 1, "272": 1}}
    report = verify_release(entry, {**files, "censoring.json": json.dumps(old).encode()},
                            sample, params, RID)
    closed = next(r for r in report.requirements if r.name == "closed world")
    assert not report.holds and not closed.passed
    assert "undeclared field in the record" in closed.measured
    assert "final_caps" not in closed.measured  # where, never the name


def test_planted_per_record_side_channel_fails_by_position(population_file):
    entry, params, sample, files = _release(population_file)
    lines = [json.loads(x) for x in files["censored.jsonl"].decode().splitlines()]
    for line, original in zip(lines, [{"100": 1, "250": 1}, {"272": 1}], strict=True):
        line["uncensored"] = len(original)  # 2 for p1 only: singles p1 out
    planted = {**files, "censored.jsonl": "".join(json.dumps(x) + "\n" for x in lines).encode()}
    report = verify_release(entry, planted, sample, params, RID)
    closed = next(r for r in report.requirements if r.name == "closed world")
    assert not report.holds and not closed.passed
    assert "line 1: an undeclared field in the record" in closed.measured
    assert "uncensored" not in closed.measured


def test_extra_file_fails_closed_world(population_file):
    entry, params, sample, files = _release(population_file)
    extra = {**files, "codes.txt": b"100\n250\n272\n"}
    report = verify_release(entry, extra, sample, params, RID)
    closed = next(r for r in report.requirements if r.name == "closed world")
    assert not report.holds and "1 undeclared file at position" in closed.measured
    assert "codes.txt" not in closed.measured


def test_count_records(population_file):
    entry, params, sample, files = _release(population_file)
    assert entry.count_records(files) == 2
    assert entry.count_records({**files, "censored.jsonl": b""}) == 0


def test_release_holding_no_code_is_below_the_baseline():
    """Baseline: publishing every record empty. A release that censored every capped code is
    no better, and says so; one that kept a code does not."""
    from ehr_release.algorithms.gccens import PopulationIndex, gccens
    from ehr_release.utility.gccens import evaluate_censoring

    population = [{"100": 1}, {"250": 1}, {"250": 1}]
    for sample, below in (([{"100": 1}], True), ([{"250": 1}], False)):
        result = gccens(sample, population, 2, {})
        report = evaluate_censoring(result.released, sample, PopulationIndex(population), 2, {},
                                    chart=False)
        assert bool(report.below_baseline) is below
