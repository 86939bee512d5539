"""The (k, k^m) verifier catches what a buggy or dishonest anonymizer could publish.

Each test starts from the worked example's correct ArtUC release and breaks one thing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ehr_release.algorithms.artuc import artuc, release_files
from ehr_release.configuration.constraints import rt_data
from ehr_release.privacy.kkm import check_kkm
from tests.kkm_release import read_records, to_files
from tests.test_artuc_worked_example import SEED, release_line, worked_example


@pytest.fixture(scope="module")
def case():
    ds, cfg = worked_example()
    anon = artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                 rng=np.random.default_rng(SEED))
    return ds, cfg, read_records(release_files(anon))


def check(case, records, files=None, **overrides):
    """Verify ``records`` (dicts or JSON text), written in the documented order."""
    ds, cfg, _ = case
    records = [json.loads(r) if isinstance(r, str) else r for r in records]
    args = {"algorithm": "artuc", "k": 2, "m": 2, "delta": 0.6, "epsilon": 2,
            "constrained": True, **overrides}
    report = check_kkm(files or to_files(records, canonical=True), ds, cfg, **args)
    return {r.name: r for r in report.requirements}, report


def test_the_honest_release_holds(case) -> None:
    reqs, report = check(case, case[2])
    assert report.holds
    assert reqs["truthfulness"].evidence == {"released": 8, "records_suppressed": 0}
    assert reqs["suppression bound ε"].evidence == {"suppressed_codes": 1}


def test_demographics_that_exclude_the_original_are_untruthful(case) -> None:
    records = [dict(r) for r in case[2]]
    for r in records:
        if r["demographics"]["age"] == [44, 47]:
            r["demographics"] = {**r["demographics"], "age": [45, 47]}  # record 7 is 44
    reqs, report = check(case, records)
    assert not reqs["truthfulness"].passed and not report.holds
    assert "match no original record" in reqs["truthfulness"].measured


def test_a_dropped_or_invented_code_is_untruthful(case) -> None:
    records = [dict(r) for r in case[2]]
    victim = next(i for i, r in enumerate(records) if ["493.2"] in r["codes"]
                  and r["demographics"]["age"] == [19, 30])
    records[victim] = {**records[victim], "codes": [c for c in records[victim]["codes"]
                                                    if c != ["493.2"]]}
    reqs, _ = check(case, records)
    assert not reqs["truthfulness"].passed
    records = [dict(r) for r in case[2]]
    records[0] = {**records[0], "codes": [*records[0]["codes"], ["999.9"]]}
    reqs, _ = check(case, records)
    assert not reqs["truthfulness"].passed
    assert not reqs["(k, k^m)-anonymity"].passed  # and 999.9 is unique in its class


def test_an_extra_copy_of_a_record_cannot_be_matched(case) -> None:
    reqs, report = check(case, [*case[2], case[2][0]])
    assert not reqs["truthfulness"].passed
    assert reqs["truthfulness"].evidence["unmatched"] == 1
    assert "cannot be counted" in reqs["suppression bound ε"].measured


def test_bounds_delta_epsilon_and_the_constraints(case) -> None:
    reqs, _ = check(case, case[2], delta=0.5, epsilon=0)
    assert not reqs["NCP bound δ"].passed and "0.5339" in reqs["NCP bound δ"].measured
    assert not reqs["suppression bound ε"].passed
    widened = [{**r, "demographics": {**r["demographics"], "age": [19, 51]}}
               if r["demographics"]["age"] == [44, 47] else r for r in case[2]]
    reqs, _ = check(case, widened, delta=1.0)
    assert reqs["truthfulness"].passed
    assert not reqs["utility constraints (Def. 9)"].passed  # [19, 51] exceeds u1's [19, 50]
    crossing = [{**r, "codes": [["458.1", "458.21", "494.1"]]} if r["demographics"]["age"]
                == [44, 47] else r for r in case[2]]
    reqs, _ = check(case, crossing)
    assert not reqs["utility constraints (Def. 9)"].passed
    assert "(458.1, 458.21, 494.1)" in reqs["utility constraints (Def. 9)"].measured
    reqs, _ = check(case, crossing, constrained=False)  # RmR: constraints are not required
    assert "utility constraints (Def. 9)" not in reqs


@pytest.mark.parametrize("line, problem", [
    (json.dumps({"cluster": "A", "demographics": {}, "codes": []}),
     "columns must be cluster, age, origin, gender, generalized_codes"),
    (release_line("A", [10, 30], "Europe", "All", []), "inside [19, 51]"),
    (release_line("A", [19, 30], "Asia", "All", []), "origin is not a node"),
    (release_line("A", [19, 30], "Europe", "All", [["494.1"], ["494.1", "493.2"]]),
     "appears twice"),
    (release_line("A", [19, 30], "Europe", "All", [])[:-1] + ', "suppressed": 0}',
     "1 undeclared column at position 5"),  # issue 14: no per-record count
])
def test_malformed_lines_are_named(case, line, problem) -> None:
    reqs, report = check(case, [line])
    assert not report.holds
    assert problem in reqs["well-formed release"].measured


def test_unreadable_or_missing_tables_are_named(case) -> None:
    files = to_files(case[2])
    for name in files:
        reqs, report = check(case, [], files={**files, name: b"{not parquet"})
        assert not report.holds
        assert f"{name} is not a readable Parquet file" in reqs["well-formed release"].measured
        rest = {n: b for n, b in files.items() if n != name}
        reqs, _ = check(case, [], files=rest)
        assert f"the release has no {name}" in reqs["well-formed release"].measured


def test_a_cluster_must_share_demographics_and_one_generalization(case) -> None:
    a = release_line("A", [19, 30], "Europe", "All", [["494.1"]])
    b = release_line("A", [19, 31], "Europe", "All", [["494.1"]])
    reqs, _ = check(case, [a, b])
    assert "mixes generalized demographics" in reqs["well-formed release"].measured
    c = release_line("A", [19, 30], "Europe", "All", [["053.20", "053.71"]])
    d = release_line("A", [19, 30], "Europe", "All", [["053.20"]])
    reqs, _ = check(case, [c, d])
    assert "generalizes 053.20 in two different ways" in reqs["well-formed release"].measured


def test_a_partial_release_is_truthful_but_a_lone_record_is_exposed(case) -> None:
    two = [r for r in case[2] if r["demographics"]["age"] == [44, 47]]
    one = [r for r in case[2] if r["demographics"]["age"] == [51, 51]][:1]
    reqs, _ = check(case, two + one)  # two records of one cluster, one of another
    assert reqs["truthfulness"].passed
    assert reqs["truthfulness"].evidence["records_suppressed"] == 5
    assert not reqs["(k, k^m)-anonymity"].passed
    assert not reqs["k-anonymity of the demographics alone"].passed


def test_suppression_is_judged_on_the_least_suppressing_truthful_assignment(shared_data):
    """Clusters may share generalized demographics and records carry no origin, so several
    assignments of originals to released records are truthful. An arbitrary one overcounted
    suppression and refused 8 of these 60 honest ArtUC releases of the MIMIC demo."""
    from ehr_release.ingest import read_dataset
    from ehr_release.registry import get
    from ehr_release.release.verification import verify_release

    dataset = read_dataset(shared_data / "mimic3-demo")
    entry = get("artuc")
    root = Path(__file__).resolve().parents[1]
    params = entry.parse({"k": "5", "m": "2", "delta": "0.3", "epsilon": "6%",
                          "config": str(root / "examples/artuc-mimic/config.yaml")})
    refused = [seed for seed in range(60)
               if not verify_release(entry, entry.anonymize(dataset, params,
                                                            np.random.default_rng(seed)),
                                     dataset, params, None).holds]
    assert refused == []


@pytest.mark.parametrize("low, high", [(44 - 1e-7, 47), (44, 47.000042), (43.5, 47)])
def test_a_range_bound_no_record_has_is_refused(case, low, high) -> None:
    """A range still holds its records when its bounds carry extra digits, so truthfulness
    and k-anonymity pass while the digits — some 50 bits a bound — say whatever the writer
    put there (a patient's exact age, an id). Every bound must be a value some original
    record inside the box has: the honest release's [min, max] always is."""
    records = [dict(r) for r in case[2]]
    for r in records:
        if r["demographics"]["age"] == [44, 47]:
            r["demographics"] = {**r["demographics"], "age": [low, high]}
    reqs, report = check(case, records)
    assert reqs["truthfulness"].passed
    assert not report.holds
    assert not reqs["attained bounds"].passed


@pytest.mark.parametrize("low, passes", [(40, True), (43.5, False), (44 - 1e-7, False)])
def test_baselines_split_bounds_keep_the_datas_precision(case, low, passes) -> None:
    """Baseline cuts the domain at split points no record need hold; its bounds may be any
    whole number (the data's ages are), never carry further digits."""
    records = [dict(r) for r in case[2]]
    for r in records:
        if r["demographics"]["age"] == [44, 47]:
            r["demographics"] = {**r["demographics"], "age": [low, 47]}
    reqs, _ = check(case, records, algorithm="artuc-baseline")
    assert reqs["attained bounds"].passed is passes


@pytest.mark.parametrize("planted", ["S000123", "053.20"])
def test_a_generalized_code_member_no_record_holds_is_refused(case, planted) -> None:
    """A generalized code reads as 'any non-empty subset of its members', so a member held
    by no record of the clusters showing it changes no record's truth: the member list
    would carry any text the writer chose (an MRN, a suppressed patient's code). Every
    member must be a code some record matched to those clusters holds. (Held to the
    utility constraints, ArtUC refuses a member outside a constraint's code set; RmR is
    not, and ArtUC takes any member inside one: 296.01 planted on the MIMIC-III demo.)"""
    records = [dict(r) for r in case[2]]
    for r in records:
        if r["demographics"]["age"] == [51, 51]:
            r["codes"] = [sorted([*g, planted]) if g == ["493.2"] else g for g in r["codes"]]
    reqs, report = check(case, records, algorithm="rmr", constrained=False)
    assert reqs["truthfulness"].passed
    assert not report.holds
    assert not reqs["held members"].passed
