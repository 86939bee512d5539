"""The verifier's replay of HorPart, VerPart and Refine (issue 32): the spec's worked example,
its documented rules, and agreement with the algorithm on random data (the two share no code,
so agreement on random inputs is evidence for both)."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehr_release.model.dataset import Dataset
from ehr_release.privacy.disassociation import build_tables, parse_release, replay_horpart
from ehr_release.privacy.disassociation.replay import (
    Choices,
    choices_requirement,
    differences,
    published,
    replayed,
)
from ehr_release.privacy.disassociation.replay_horpart import _Leaf, clusters, group_leaves
from ehr_release.privacy.disassociation.replay_refine import Cluster, refine
from ehr_release.privacy.disassociation.replay_verpart import verpart

# The spec's worked example (01-disassociation.md): k = 3, m = 2, maxClusterSize = 6.
EXAMPLE = [
    "296.00 296.01 296.02 834.0 944.01", "296.00 296.01 296.02 401.0 944.01 692.71 695.10",
    "296.00 296.02 692.71 834.0 695.10", "296.00 296.01 692.71 401.0",
    "296.00 296.01 296.02 692.71 695.10", "296.03 295.04 404.00 480.1",
    "294.10 296.03 834.0 944.01", "294.10 295.04 296.03 480.1", "294.10 295.04 404.00",
    "294.10 295.04 296.03 834.0 944.01"]
POLICY = [{"294.10", "295.04", "296.00", "296.01", "296.02", "296.03"}, {"692.71", "695.10"},
          {"401.0", "404.00"}, {"480.1"}, {"834.0", "944.01"}]


def _example() -> tuple[list[str], list[tuple[int, ...]], list[int]]:
    names = sorted({c for r in EXAMPLE for c in r.split()})
    index = {c: i for i, c in enumerate(names)}
    rows = [tuple(sorted(index[c] for c in r.split())) for r in EXAMPLE]
    owner = {c: i for i, u in enumerate(POLICY) for c in u}
    return names, rows, [owner.get(c, -1) for c in names]


def test_the_worked_example_is_replayed_as_the_spec_states() -> None:
    names, rows, constraint = _example()
    found = clusters(rows, constraint, 3, 6)
    assert [sorted(g) for g in found] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    spelled = [[{names[t] for t in d} for d in verpart([rows[r] for r in g], 3, 2, constraint)[0]]
               for g in found]
    assert spelled == [[{"296.00", "296.01", "296.02"}, {"692.71", "695.10"}],
                       [{"294.10", "295.04", "296.03"}]]
    split = [verpart([rows[r] for r in g], 3, 2, constraint) for g in found]
    assert [{names[t] for t in items} for _, items in split] == [
        {"401.0", "834.0", "944.01"}, {"404.00", "480.1", "834.0", "944.01"}]
    units = refine([Cluster([rows[r] for r in g], frozenset(t for d in ds for t in d), items)
                    for g, (ds, items) in zip(found, split, strict=True)], 3, 2, constraint, 24)
    assert [(u.members, [{names[t] for t in d} for d in u.shared]) for u in units] == [
        ((0, 1), [{"834.0", "944.01"}])]
    assert {names[t] for t in units[0].item_codes} == {"401.0", "404.00", "480.1"}


def test_a_join_larger_than_the_bound_is_not_made() -> None:
    names, rows, constraint = _example()
    found = clusters(rows, constraint, 3, 6)
    split = [verpart([rows[r] for r in g], 3, 2, constraint) for g in found]
    units = refine([Cluster([rows[r] for r in g], frozenset(t for d in ds for t in d), items)
                    for g, (ds, items) in zip(found, split, strict=True)], 3, 2, constraint, 9)
    assert units == []


def _leaf(n: int, d1: bool) -> _Leaf:
    _leaf.start = getattr(_leaf, "start", 0) + n  # type: ignore[attr-defined]
    return _Leaf(list(range(_leaf.start - n, _leaf.start)), d1)  # type: ignore[attr-defined]


def test_small_leaves_are_grouped_by_the_documented_carry_rule() -> None:
    """k = 3: a small D1 leaf is carried into the next leaf; a small D2 leaf (carry
    included) joins the previous cluster, or starts the first; leftovers join the last."""
    sizes = [len(g) for g in group_leaves(
        [_leaf(1, True), _leaf(4, False), _leaf(2, True), _leaf(1, False), _leaf(3, False)], 3)]
    assert sizes == [5, 3, 3]
    assert [len(g) for g in group_leaves([_leaf(1, False), _leaf(5, True)], 3)] == [1, 5]
    assert [len(g) for g in group_leaves([_leaf(4, False), _leaf(1, True)], 3)] == [5]
    assert [len(g) for g in group_leaves([_leaf(2, True)], 3)] == [2]


@pytest.mark.parametrize("array_min", [replay_horpart.ARRAY_MIN, 1])
def test_a_split_prefers_the_current_constraint_then_any_constraint_then_string_order(
        array_min: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_horpart, "ARRAY_MIN", array_min)
    # codes 0..3; constraint 0 = {2, 3}; max size 2 so every partition of ≥ 2 splits
    rows = [(0, 1), (0, 1), (0, 2), (1, 3), (2, 3)]
    # root: no current constraint; constrained codes 2 (2 holders) and 3 (2): tie → 2;
    # D1 {r2, r4} then continues with constraint 0: code 3 (r4) before any other
    got = clusters(rows, [-1, -1, 0, 0], 1, 2)
    assert got[0] == [4] and got[1] == [2]
    # without the policy, the most frequent code first: 0 and 1 (3 holders each) → 0, then
    # 1 inside it: r0 and r1 (holding both) are the first leaf
    assert sorted(clusters(rows, [-1] * 4, 1, 2)[0]) == [0, 1]


CODES = [f"{c:03d}.{d}" for c in range(100, 106) for d in range(4)]


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[list[str]], dict[str, int], int, int, int | None]:
    n = draw(st.integers(4, 160))
    vocab = draw(st.integers(2, len(CODES)))
    # One strategy for every record: making one per record cost more than the test.
    record = st.lists(st.sampled_from(CODES[:vocab]), max_size=7)
    records = [sorted(set(draw(record))) for _ in range(n)]
    k = draw(st.integers(2, max(2, min(6, n))))
    groups = draw(st.lists(st.integers(-1, 4), min_size=len(CODES), max_size=len(CODES)))
    size = draw(st.one_of(st.none(), st.integers(k, 3 * k)))
    return records, {c: g for c, g in zip(CODES, groups, strict=True) if g >= 0}, k, \
        draw(st.integers(1, 3)), size


def _algorithm_release(records: list[list[str]], policy: dict[str, int], k: int, m: int,
                       size: int | None) -> dict[str, bytes]:
    from ehr_release.algorithms.disassociation import disassociate, encode_code_sets

    enc = encode_code_sets(records)
    constraint = np.array([policy.get(c, -1) for c in enc.codes], dtype=np.int64)
    result = disassociate(enc, k, m, constraint, np.random.default_rng(0),
                          max_cluster_size=size)
    return {"release.parquet": result.release.to_bytes()}


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(problems(), st.sampled_from([replay_horpart.ARRAY_MIN, 4]))
def test_the_replay_agrees_with_the_algorithm(problem: Any, array_min: int) -> None:
    """Both ways HorPart's chains are walked (Python counts; arrays, used from ARRAY_MIN
    records on and forced here on small data) give the algorithm's release."""
    records, policy, k, m, size = problem
    if k > len(records):
        return
    files = _algorithm_release(records, policy, k, m, size)
    rel = parse_release(files)
    tables = build_tables(rel, Dataset.from_records(records))
    with patch.object(replay_horpart, "ARRAY_MIN", array_min):
        want = replayed(tables, k, m, Choices(policy, size))
    assert differences(published(rel, tables), want) == []


def test_a_difference_is_named_by_labels_only() -> None:
    records = [r.split() for r in EXAMPLE]
    owner = {c: i for i, u in enumerate(POLICY) for c in u}
    files = _algorithm_release(records, owner, 3, 2, 6)
    rel = parse_release(files)
    tables = build_tables(rel, Dataset.from_records(records))
    assert choices_requirement(rel, tables, 3, 2, Choices(owner, 6)).passed
    # the same release judged under another policy: HorPart and VerPart choose otherwise
    other = choices_requirement(rel, tables, 3, 2, Choices({}, 6))
    assert not other.passed
    text = other.measured + repr(other.evidence)
    assert not any(c in text for r in EXAMPLE for c in r.split()), text


# ----------------------------------------------------------------- without the original
def _published_verdict(records: list[list[str]], policy: dict[str, int], k: int, m: int,
                       files: dict[str, bytes] | None = None) -> Any:
    from ehr_release.privacy.disassociation.published_checks import check_published

    files = files or _algorithm_release(records, policy, k, m, None)
    return check_published(files, k, m, policy)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(problems())
def test_honest_releases_pass_every_check_a_recipient_can_run(problem: Any) -> None:
    records, policy, k, m, _ = problem
    if k > len(records):
        return
    verdict = _published_verdict(records, policy, k, m)
    assert verdict.report.holds, verdict.report.to_dict()
    assert [r.name for r in verdict.report.requirements] == [
        "release format", "subrecord order", "chunk order (from the bytes)"]
    assert "choices replayed" in verdict.not_run


def test_a_recipient_refuses_record_chunks_in_another_order() -> None:
    from .disassociation_layout import files_of, in_documented_order, read_doc

    records = [r.split() for r in EXAMPLE]
    owner = {c: i for i, u in enumerate(POLICY) for c in u}
    doc = read_doc(_algorithm_release(records, owner, 3, 2, 6)["release.parquet"])
    assert _published_verdict(records, owner, 3, 2, files_of(doc)).report.holds
    chunks = doc["clusters"][0]["record_chunks"]
    assert len(chunks) == 2
    chunks.reverse()
    verdict = _published_verdict(records, owner, 3, 2, files_of(in_documented_order(doc)))
    assert [r.name for r in verdict.report.failures] == ["chunk order (from the bytes)"]
    assert "cluster P1 record chunk 1" in verdict.report.failures[0].measured


def test_a_recipient_refuses_a_second_constraint_split_across_chunks() -> None:
    """P1's second chunk {692.71, 695.10} (one constraint) torn: 695.10 joins chunk 1, whose
    first code is of another constraint, while 692.71 is left behind."""
    from .disassociation_layout import files_of, in_documented_order, read_doc

    records = [r.split() for r in EXAMPLE]
    owner = {c: i for i, u in enumerate(POLICY) for c in u}
    doc = read_doc(_algorithm_release(records, owner, 3, 2, 6)["release.parquet"])
    first, second = doc["clusters"][0]["record_chunks"]
    # subrecords of one record are not linked in the release: pair them by position (any
    # pairing keeps the supports, which is all the recipient's check reads)
    doc["clusters"][0]["record_chunks"] = [
        [sorted(a + [c for c in b if c == "695.10"]) for a, b in zip(first, second,
                                                                      strict=True)],
        [[c for c in b if c != "695.10"] for b in second]]
    verdict = _published_verdict(records, owner, 3, 2, files_of(in_documented_order(doc)))
    assert "chunk order (from the bytes)" in [r.name for r in verdict.report.failures]


def test_without_the_policy_a_recipient_says_the_chunk_order_was_not_checked() -> None:
    from ehr_release.privacy.disassociation.published_checks import check_published

    records = [r.split() for r in EXAMPLE]
    owner = {c: i for i, u in enumerate(POLICY) for c in u}
    verdict = check_published(_algorithm_release(records, owner, 3, 2, 6), 3, 2, None)
    assert "chunk order (from the bytes)" in verdict.not_run
    assert [r.name for r in verdict.report.requirements] == ["release format",
                                                             "subrecord order"]
