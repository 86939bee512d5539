"""The LDA attack audit: the adversary who knows a target's whole trajectory.

Its candidate sets are checked against a brute-force oracle (every order-preserving choice
of the target's positions, no greedy argument); it never fails what the algorithm releases,
and it finds every planted violation: trajectories published too precisely, lines out of
pseudonym order, non-canonical bytes.
"""

from __future__ import annotations

import ast
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.algorithms.lda import anonymize_trajectories, make_model
from ehr_release.algorithms.lda.release import release_files
from ehr_release.governance.pseudonyms import KEY_ENV, pseudonymize_records, pseudonymizer
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.privacy.attacks import lda as attack_module
from ehr_release.privacy.attacks.lda import _candidate_counts, _read, attack_trajectories
from ehr_release.release.verification import attack_release
from ehr_release.samples.sample import generate_sample

H = icd9_hierarchy()
CODES = ["401.0", "401.1", "401.9", "250.00", "250.01", "272.0", "272.4", "428.0"]
MODEL = make_model(H, CODES)
FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
NODES = sorted({n for c in CODES for n in (c, *H.ancestors(c))})


def covers(pub, orig) -> bool:
    node, lo, hi = pub
    code, age = orig
    return (node == code or node in set(H.ancestors(code))) and lo <= age <= hi


def oracle(records, trajectories) -> list[int]:
    """Per patient: records whose trajectory maps, in order, onto some of its positions."""
    groups = Counter(records)
    out = []
    for orig in trajectories:
        n = 0
        for pub, size in groups.items():
            if any(all(covers(p, orig[i]) for p, i in zip(pub, pos, strict=True))
                   for pos in itertools.combinations(range(len(orig)), len(pub))):
                n += size
        out.append(n)
    return out


trajectory = st.lists(st.tuples(st.sampled_from(CODES), st.integers(30, 37)), max_size=5
                      ).map(lambda t: sorted(t, key=lambda p: (p[1], p[0])))


@st.composite
def block(draw):
    size = 1 << draw(st.integers(0, 3))
    lo = 1 + size * draw(st.integers(28 // size, 38 // size))
    return lo, lo + size - 1


published_pair = st.builds(lambda n, b: (n, *b), st.sampled_from(NODES), block())


def ids(n: int) -> list[str]:
    return [f"p{i:03d}" for i in range(n)]


def release(trajs, k: int, method: str = "ags") -> dict[str, bytes]:
    result = anonymize_trajectories(trajs, k, MODEL, method)
    return release_files(ids(len(trajs)), result, {"k": k, "method": method})


def with_trajectories(files, published) -> dict[str, bytes]:
    lines = [{"patient_id": pid, "trajectory": [[c, [lo, hi]] for c, lo, hi in t]}
             for pid, t in zip(ids(len(published)), published, strict=True)]
    data = "".join(json.dumps(r) + "\n" for r in lines).encode()
    return {**files, "trajectories.jsonl": data}


# ------------------------------------------------------------------------ the candidates
@FAST
@given(st.lists(trajectory, min_size=1, max_size=8),
       st.lists(st.lists(published_pair, max_size=4), min_size=1, max_size=10))
def test_candidate_sets_equal_the_brute_force_oracle(trajs, published):
    records = [tuple(t) for t in published]
    assert _candidate_counts(records, trajs, H).tolist() == oracle(records, trajs)


def test_partial_knowledge_only_enlarges_candidate_sets():
    """A prefix or sub-sequence of the trajectory keeps every record the whole one keeps."""
    trajs = [[("401.1", 34), ("401.1", 35), ("250.00", 36)]]
    records = [(("401", 33, 36),), (("401.1", 34, 34), ("250.0", 35, 36)), (("272", 33, 40),)]
    whole = _candidate_counts(records, trajs, H)[0]
    for r in range(len(trajs[0]) + 1):
        for part in itertools.combinations(trajs[0], r):
            # the attacker knowing only ``part``: any record consistent with some trajectory
            # containing it — the whole trajectory is one, so it keeps at least these
            assert oracle(records, [list(part)])[0] <= whole or r < len(trajs[0])
    assert whole == 2


# ----------------------------------------------------------------- correct releases pass
@FAST
@given(st.lists(trajectory, min_size=2, max_size=10), st.integers(2, 4),
       st.sampled_from(["ags", "baseline"]))
def test_never_fails_a_release_of_the_algorithm(trajs, k, method):
    assume(len(trajs) >= k)
    files = release(trajs, k, method)
    report = attack_trajectories(files, trajs, H, k)
    assert report.passed, report.measured
    assert report.exhaustive and report.knowledge_sets_tried == len(trajs)
    read = _read(files)
    assert read.side_channels == [] and not any(read.extras)
    assert report.smallest_candidate_set == min(oracle(read.records, trajs))
    # the own-record lower bounds only skip work: the same answer
    assert attack_trajectories(files, trajs, H, k, patient_ids=ids(len(trajs))) == report


@pytest.mark.parametrize("name", ["lda", "lda-baseline"])
def test_a_flow_release_passes_through_the_registry(name, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "ef" * 32)
    sample = generate_sample(80, seed=11, longitudinal=True)
    entry = registry.get(name)
    params = entry.parse({"k": "3"})
    files = entry.anonymize(sample, params, None)
    files[entry.id_file] = pseudonymize_records(files[entry.id_file], pseudonymizer("r1"))
    report = attack_release(entry, files, sample, params, "r1")
    assert report.passed, report.measured
    assert report.smallest_candidate_set >= 3 and report.knowledge_sets_tried == 80
    text = json.dumps(report.to_dict())
    assert not any(pid in text for pid in sample.patient_ids)
    assert not any(f'"{c}"' in text for c in CODES)


# -------------------------------------------------------------- planted violations found
@FAST
@given(st.lists(trajectory, min_size=3, max_size=10), st.integers(2, 3), st.data())
def test_finds_trajectories_published_too_precisely(trajs, k, data):
    """Some patients' original trajectories published as they are: whenever that leaves a
    patient fewer than k candidates, the attack says so, with the oracle's number."""
    assume(len(trajs) >= k)
    files = release(trajs, k)
    records = _read(files).records
    exact = data.draw(st.sets(st.integers(0, len(trajs) - 1), min_size=1))
    planted = [tuple((c, a, a) for c, a in trajs[i]) if i in exact else records[i]
               for i in range(len(trajs))]
    smallest = min(oracle(planted, trajs))
    assume(smallest < k)
    edited = with_trajectories(files, planted)
    for known_ids in (None, ids(len(trajs))):
        report = attack_trajectories(edited, trajs, H, k, patient_ids=known_ids)
        assert not report.passed
        assert report.smallest_candidate_set == smallest
        assert f"{sum(n < k for n in oracle(planted, trajs))} patient(s) below" in \
            report.measured


@FAST
@given(st.lists(trajectory, min_size=2, max_size=8), st.integers(2, 3), st.data())
def test_finds_a_per_record_field_that_singles_a_patient_out(trajs, k, data):
    """A correct release plus an undeclared per-record field (say, each patient's exact first
    age): the adversary who can compute it from the trajectory keeps only the records
    showing the target's value."""
    assume(len(trajs) >= k)
    files = release(trajs, k)
    target = data.draw(st.integers(0, len(trajs) - 1))
    lines = [json.loads(x) for x in files["trajectories.jsonl"].decode().splitlines()]
    for i, line in enumerate(lines):
        line["first_age"] = 0 if i != target else 1  # lines are in id order: p000, p001, …
    edited = {**files, "trajectories.jsonl": "".join(json.dumps(r) + "\n"
                                                      for r in lines).encode()}
    for known_ids in (ids(len(trajs)), None):
        report = attack_trajectories(edited, trajs, H, k, patient_ids=known_ids)
        assert not report.passed
        assert report.smallest_candidate_set == 1 and "undeclared fields" in report.measured


def test_finds_a_patient_whose_group_was_split():
    trajs = [[("401.1", 34), ("401.1", 35)], [("401.9", 35)], [("401.0", 36)],
             [("250.00", 40)], [("250.01", 41)]]
    good = [(("401", 33, 36),)] * 3 + [(("250.0", 33, 48),)] * 2
    files = with_trajectories(release(trajs, 2), good)
    assert attack_trajectories(files, trajs, H, 2).passed
    # the group {p0, p1, p2} split: p0, p1 share a narrower block, p2 alone is exact
    split = [(("401", 35, 35),)] * 2 + [(("401.0", 36, 36),)] + good[3:]
    report = attack_trajectories(with_trajectories(files, split), trajs, H, 2,
                                 patient_ids=ids(5))
    assert not report.passed and report.smallest_candidate_set == 1
    assert "1 patient(s) below 2" in report.measured


@pytest.mark.parametrize("edit, word", [
    (lambda lines: lines[::-1], "order"),
    (lambda lines: [lines[0], "", *lines[1:]], "blank"),
    (lambda lines: [lines[0].replace(", ", ",  ", 1), *lines[1:]], "canonical"),
    (lambda lines: [json.dumps(dict(reversed(list(json.loads(lines[0]).items())))),
                    *lines[1:]], "key order"),
])
def test_byte_level_side_channels_fail_the_audit(edit, word):
    trajs = [[("401.1", 34)], [("401.9", 35)], [("401.0", 36)]]
    files = release(trajs, 3)
    lines = files["trajectories.jsonl"].decode().splitlines()
    edited = {**files, "trajectories.jsonl": ("\n".join(edit(lines)) + "\n").encode()}
    assert attack_trajectories(files, trajs, H, 3).passed
    report = attack_trajectories(edited, trajs, H, 3)
    assert not report.passed and report.smallest_candidate_set == 3
    assert word in report.measured


_NODES = ["401.1", "401", "4,01", "40:1", "401é", 'say "401"', "a\\b", "tab\there"]
_AGES = [34, 35, 0, -1, 2 ** 40, 2 ** 70, 34.0, True]
_EDITS = [
    lambda line: line,
    lambda line: line.replace(", ", ",  ", 1),
    lambda line: line.replace("4", "\\u0034", 1),
    lambda line: line.replace(": ", ":", 1),
    lambda line: json.dumps(dict(reversed(list(json.loads(line).items())))),
    lambda line: line.replace("\"patient_id\"", "\"patient_id\": 0, \"patient_id\"", 1),
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(_NODES), st.sampled_from(_AGES),
                                             st.sampled_from(_AGES)), max_size=3),
                          st.sampled_from(_EDITS)), min_size=1, max_size=5),
       st.booleans())
def test_the_column_wise_reader_vouches_only_for_what_the_line_reader_finds_clean(rows,
                                                                                  shuffle):
    """The one-pass reader may read a file only when the per-line reader finds no side
    channel and the same records; it reads every plainly canonical file whose integers fit
    in 64 bits (orjson reads larger ones as floats, and leaves them to the line reader)."""
    from ehr_release.privacy.attacks.lda import _each_line

    lines = [edit(json.dumps({"patient_id": f"p{i}", "trajectory": [[n, [a, b]]
                                                                    for n, a, b in pairs]},
                             ensure_ascii=False))
             for i, (pairs, edit) in enumerate(rows)]
    if shuffle:
        lines.reverse()
    data = ("\n".join(lines) + "\n").encode()
    plain = attack_module._plain(data)
    try:
        each = _each_line({"trajectories.jsonl": data})
    except attack_module._Unreadable:
        each = None
    if plain is not None:
        assert each is not None and not each.side_channels
        assert (plain.pids, plain.records) == (each.pids, each.records)
    small = all(abs(a) < 2 ** 63 and abs(b) < 2 ** 63 for pairs, _ in rows for _, a, b in pairs)
    if each is not None and not each.side_channels and small:
        assert plain is not None
    # the pattern reader (canonical_lines) reads a narrower set of files, the same way
    patterned = attack_module._patterned(data)
    if patterned is not None:
        assert plain is not None
        assert (patterned.pids, patterned.records) == (plain.pids, plain.records)
    if plain is not None and data.isascii() and b"\\" not in data and all(
            abs(a) < 10 ** 18 and abs(b) < 10 ** 18 for pairs, _ in rows for _, a, b in pairs):
        assert patterned is not None


def test_a_non_canonical_metadata_file_fails_the_audit():
    trajs = [[("401.1", 34)], [("401.9", 35)]]
    files = release(trajs, 2)
    meta = json.loads(files["lda.json"])
    report = attack_trajectories({**files, "lda.json": json.dumps(meta).encode()}, trajs, H, 2)
    assert not report.passed and "lda.json" in report.measured


def test_unreadable_release_fails_without_values():
    report = attack_trajectories({"trajectories.jsonl": b"{nope\n"}, [[("401.1", 34)]], H, 2)
    assert not report.passed and report.smallest_candidate_set is None


def test_an_age_beyond_64_bits_is_unreadable_not_a_crash():
    trajs = [[("401.1", 34)], [("401.9", 35)]]
    files = release(trajs, 2)
    line = json.loads(files["trajectories.jsonl"].splitlines()[0])
    line["trajectory"][0][1][1] = 1 << 70  # a last age no 64-bit integer holds
    report = attack_trajectories({**files, "trajectories.jsonl": json.dumps(line).encode()
                                  + b"\n"}, trajs, H, 2)
    assert not report.passed and "64 bits" in report.measured
    assert str(1 << 70) not in report.measured


def test_an_empty_release_of_nobody_passes():
    report = attack_trajectories({"trajectories.jsonl": b"", "lda.json": b"{}\n"}, [], H, 2)
    assert report.passed


# --------------------------------------------------------------------------- the wall
def test_the_attack_and_schema_import_neither_algorithms_nor_model_checks():
    banned = ("ehr_release.algorithms", "ehr_release.privacy.lda",
              "ehr_release.privacy.json_lines", "ehr_release.privacy.disassociation",
              "ehr_release.privacy.kkm", "ehr_release.privacy.gccens",
              "ehr_release.privacy.diffgen", "ehr_release.privacy.itemset_counts")
    from ehr_release.privacy.formats import lda as formats_module

    for module in (attack_module, formats_module):
        tree = ast.parse(Path(module.__file__).read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.startswith(banned)], module.__name__
