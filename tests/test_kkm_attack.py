"""The (k, k^m) attack audit: the model's adversary on the published bytes.

It must never fail a correct release (ArtUC, RmR, Baseline on random data), and it must find
every planted narrowing: checked against a brute-force adversary written here, line by line,
on randomly edited releases — the audit's smallest candidate set must be exactly the brute
force's.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.algorithms import rmr as poulis
from ehr_release.algorithms.artuc import artuc, artuc_unconstrained, baseline, release_files
from ehr_release.configuration.constraints import NumericalAttribute, parse_config, rt_data
from ehr_release.core.errors import ParameterError
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.privacy.attacks import kkm as attack_module
from ehr_release.privacy.attacks.kkm import attack_kkm, knowledge_sets
from ehr_release.privacy.kkm import check_kkm
from tests.kkm_release import read_records, to_files
from tests.test_artuc_properties import ATTRS, TEMPLATES, _dataset, records
from tests.test_artuc_worked_example import CONFIG, ROWS, SEED, worked_example

NAMES = ("artuc", "artuc-baseline", "rmr", "artuc-unconstrained")


@pytest.fixture
def params(tmp_path: Path) -> dict:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return registry.get("artuc").parse({"k": "2", "m": "2", "delta": "0.6", "epsilon": "2",
                                        "config": str(path), "seed": str(SEED)})


def _old_format(anon) -> dict[str, bytes]:
    """The release as published before issue 14: with each record's suppressed count."""
    names = anon.table.names
    lines = []
    for n, (cluster, gen) in enumerate(zip(anon.clusters, anon.codes, strict=True), 1):
        demo = anon.space.describe(cluster.box)
        demo = {a: [int(x) for x in v] if isinstance(v, list) else v for a, v in demo.items()}
        items = [set() for _ in range(cluster.size)]
        lost = [0] * cluster.size
        for r, it in zip(gen.rec.tolist(), gen.item.tolist(), strict=True):
            if it < 0:
                lost[r] += 1
            else:
                items[r].add(it)
        lines += [{"cluster": f"C{n}", "demographics": demo,
                   "codes": sorted([names[c] for c in gen.items[i]] for i in its),
                   "suppressed": lost[r]} for r, its in enumerate(items)]
    return to_files(lines, canonical=True)


def test_finding_1_the_attack_isolates_p5_in_the_old_format_only() -> None:
    ds, cfg = worked_example()
    anon = artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                 rng=np.random.default_rng(SEED))
    old = attack_kkm(_old_format(anon), ds, cfg, k=2, m=2)
    assert not old.passed and old.smallest_candidate_set == 1
    assert "undeclared fields" in old.measured
    new = attack_kkm(release_files(anon), ds, cfg, k=2, m=2)
    assert new.passed and new.smallest_candidate_set == 2 and new.exhaustive
    # 8 patients: C(3,2) + C(3,2) + C(2,2) + C(3,2) + 1 + C(2,2) + C(3,2) + C(2,2) sets
    assert new.knowledge_sets_tried == 3 + 3 + 1 + 3 + 1 + 1 + 3 + 1


@pytest.mark.parametrize("name", NAMES)
def test_registered_attack_passes_the_worked_example_and_names_nothing(params, name) -> None:
    ds, _ = worked_example()
    entry = registry.get(name)
    files = entry.anonymize(ds, params, np.random.default_rng(SEED))
    report = entry.attack(files, ds, params)
    assert report.passed and report.threshold == 2 and report.exhaustive
    text = json.dumps(report.to_dict())
    for value in {c for r in ROWS for c in r[3].split()} | {r[1] for r in ROWS}:
        assert value not in text
    assert "3 released demographics and up to 2 diagnosis codes" in report.attacker_model


def test_an_undeclared_file_of_code_sets_is_read_by_the_attack() -> None:
    ds, cfg = worked_example()
    anon = artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                 rng=np.random.default_rng(SEED))
    stray = "".join(json.dumps(r[3].split()) + "\n" for r in ROWS).encode()
    report = attack_kkm({**release_files(anon), "raw.jsonl": stray}, ds, cfg, k=2, m=2)
    assert not report.passed and report.smallest_candidate_set == 1
    assert "undeclared files" in report.measured


def test_lines_out_of_content_order_count_as_labels() -> None:
    ds, cfg = worked_example()
    anon = artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                 rng=np.random.default_rng(SEED))
    lines = read_records(release_files(anon))
    swapped = [lines[3], *lines[:3], *lines[4:]]  # two distinct lines of C1 swapped
    report = attack_kkm(to_files(swapped), ds, cfg, k=2, m=2)
    assert not report.passed and report.smallest_candidate_set == 1
    assert "content order" in report.measured


def test_sampling_is_seeded_and_keeps_every_rare_set(monkeypatch) -> None:
    monkeypatch.setattr(attack_module, "EXHAUSTIVE_LIMIT", 5)
    monkeypatch.setattr(attack_module, "MIN_SAMPLED", 6)
    codes = [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3, 4]]
    first, second = (knowledge_sets(codes, 2, {4}) for _ in range(2))
    assert not first.exhaustive
    assert np.array_equal(first.patient, second.patient)
    assert np.array_equal(first.codes, second.codes)
    got = {(int(p), tuple(c)) for p, c in zip(first.patient, first.codes.tolist(),
                                                 strict=True)}
    assert {(3, (x, 4)) for x in (1, 2, 3)} <= got     # every set holding the rare code
    assert len(got - {(3, (x, 4)) for x in (1, 2, 3)}) >= 6
    ds, cfg = worked_example()
    anon = artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                 rng=np.random.default_rng(SEED))
    report = attack_kkm(release_files(anon), ds, cfg, k=2, m=2)
    assert report.passed and not report.exhaustive


# --------------------------------------------------------------------------- brute force
def _covers(value: object, shown: object, attr) -> bool:
    if isinstance(attr, NumericalAttribute):
        return shown[0] <= float(value) <= shown[1]
    return shown == value or shown in set(attr.hierarchy.ancestors(str(value)))


def brute_force(lines: list[dict], ds, cfg, m: int) -> int | None:
    """Smallest non-empty candidate set, by checking every line for every knowledge set."""
    def unit(r):
        return r["cluster"], json.dumps(r["demographics"], sort_keys=True)

    vocab: dict = {}
    for r in lines:
        vocab.setdefault(unit(r), set()).update(c for g in r["codes"] for c in g)
    data = rt_data(ds, cfg)
    best = None
    for i, codes in enumerate(data.codes):
        demo = data.demographics.iloc[i]
        for known in itertools.combinations(sorted(codes), min(m, len(codes))):
            count: Counter = Counter()
            for r in lines:
                shown = {c for g in r["codes"] for c in g}
                if all(_covers(demo[a.name], r["demographics"][a.name], a)
                       for a in cfg.attributes) and all(
                        c in shown or c not in vocab[unit(r)] for c in known):
                    count[json.dumps({x: r[x] for x in r if x not in
                                      ("cluster", "demographics", "codes")})] += 1
            for n in count.values():
                best = n if best is None else min(best, n)
    return best


def _edit(lines: list[dict], draw, pool: list[str]) -> list[dict]:
    """One random edit a dishonest or buggy writer could make."""
    lines = [json.loads(json.dumps(r)) for r in lines]
    i = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.integers(0, 4))
    r = lines[i]
    if kind == 0:
        del lines[i]
    elif kind == 1 and r["codes"]:
        r["codes"].pop(draw(st.integers(0, len(r["codes"]) - 1)))
    elif kind == 2:
        used = {c for x in lines if x["cluster"] == r["cluster"] for g in x["codes"] for c in g}
        fresh = [c for c in pool if c not in used]
        if fresh:
            r["codes"] = sorted([*r["codes"], [draw(st.sampled_from(fresh))]])
    elif kind == 3:
        r["cluster"] = "Z"
    else:
        r["rank"] = 1
    return lines  # written in content order (to_files canonical): position adds nothing


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=records, template=st.sampled_from(range(len(TEMPLATES))), k=st.integers(2, 3),
       m=st.integers(1, 2), seed=st.integers(0, 2**16), data=st.data())
def test_attack_passes_correct_releases_and_matches_brute_force_on_edits(
        rows, template, k, m, seed, data) -> None:
    ds = _dataset(rows)
    cfg = parse_config({"attributes": ATTRS, "constraints": TEMPLATES[template]},
                       lambda ref: icd9_hierarchy())
    rt = rt_data(ds, cfg)
    runs = {"artuc-baseline": lambda: baseline(rt, cfg, k=k, m=m, epsilon=1e9),
            "artuc": lambda: artuc(rt, cfg, k=k, m=m, delta=1.0, epsilon=1e9,
                                   rng=np.random.default_rng(seed)),
            "artuc-unconstrained": lambda: artuc_unconstrained(
                rt, cfg, k=k, m=m, delta=1.0, epsilon=1e9, rng=np.random.default_rng(seed)),
            "rmr": lambda: poulis.rmr(rt, cfg, icd9_hierarchy(), k=k, m=m, delta=1.0,
                                      epsilon=1e9, rng=np.random.default_rng(seed))}
    pool = sorted({c for r in rows for c in r[3]})
    for name, run in runs.items():
        try:
            anon = run()
        except ParameterError:
            continue
        files = release_files(anon)
        assert check_kkm(files, ds, cfg, algorithm=name, k=k, m=m, delta=None,
                          epsilon=1e9,
                          constrained=name not in ("rmr", "artuc-unconstrained")).holds
        report = attack_kkm(files, ds, cfg, k=k, m=m)
        assert report.passed, (name, report)
        lines = read_records(files)
        assert report.smallest_candidate_set == brute_force(lines, ds, cfg, m)
        if not lines:
            continue
        edited = _edit(lines, data.draw, pool)
        got = attack_kkm(to_files(edited, canonical=True), ds, cfg, k=k, m=m)
        want = brute_force(edited, ds, cfg, m)
        assert got.smallest_candidate_set == want, (name, edited)
        assert got.passed == (want is None or want >= k)
        event(f"edit narrows below k: {not got.passed}")


def test_a_planted_per_record_field_is_always_found() -> None:
    """On the worked example, a field singling out any one line narrows to 1."""
    ds, cfg = worked_example()
    anon = artuc(rt_data(ds, cfg), cfg, k=2, m=2, delta=0.6, epsilon=2,
                 rng=np.random.default_rng(SEED))
    lines = read_records(release_files(anon))
    for i in range(len(lines)):
        planted = [{**r, "flag": int(j == i)} for j, r in enumerate(lines)]
        report = attack_kkm(to_files(planted), ds, cfg, k=2, m=2)
        assert not report.passed and report.smallest_candidate_set == 1
