"""A comparison's comparator releases: made once per (algorithm, parameters), shared by every
candidate's evaluation, the same as a fresh computation."""

from __future__ import annotations

import pickle
import threading
import time

import pytest

from ehr_release import registry
from ehr_release.comparison.compare import Candidate
from ehr_release.parameters.comparators import ComparatorReleases, release_key
from tests.test_artuc_registry import EXAMPLE


def test_a_release_is_computed_once_even_when_two_threads_ask_together() -> None:
    dataset = object()
    store = ComparatorReleases(dataset)
    calls: list[int] = []

    def slow() -> dict[str, bytes]:
        calls.append(1)
        time.sleep(0.2)
        return {"records.parquet": b"x"}

    got: list[dict[str, bytes]] = []
    threads = [threading.Thread(target=lambda: got.append(store.get("k", dataset, slow)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and store.computed == 1
    assert got == [{"records.parquet": b"x"}] * 3
    assert store.get("other", dataset, lambda: {"b": b"y"}) == {"b": b"y"}
    assert store.computed == 2


def test_another_dataset_is_never_served_and_failures_are_not_rerun() -> None:
    dataset = object()
    store = ComparatorReleases(dataset)
    assert store.get("k", dataset, lambda: {"a": b"kept"}) == {"a": b"kept"}
    assert store.get("k", dataset, lambda: {"a": b"new"}) == {"a": b"kept"}
    assert store.get("k", object(), lambda: {"a": b"new"}) == {"a": b"new"}  # not its data
    runs: list[int] = []

    def fails() -> dict[str, bytes]:
        runs.append(1)
        raise ValueError("delta is below the NCP")

    for _ in range(2):
        with pytest.raises(ValueError, match="delta"):
            store.get("bad", dataset, fails)
    assert runs == [1]
    copy = pickle.loads(pickle.dumps(store))  # a process runner's copy starts empty
    assert copy.get("k", copy.dataset, lambda: {"a": b"new"}) == {"a": b"new"}


def test_key_is_what_the_algorithm_reads() -> None:
    artuc, rmr = registry.get("artuc"), registry.get("rmr")
    given = artuc.parse({"k": "5", "config": str(EXAMPLE / "config.yaml")})
    as_candidate = release_key("artuc", artuc.params, given)
    # RmR's evaluation asks for ArtUC with RmR's parameters: ArtUC's own options default.
    from_rmr = rmr.parse({"k": "5", "config": str(EXAMPLE / "config.yaml")})
    assert release_key("artuc", artuc.params, from_rmr) == as_candidate
    assert release_key("artuc", artuc.params, {**given, "compare": "true"}) == as_candidate
    for changed in ({"k": 6}, {"merge_order": "suppression-first"}, {"relax": True}):
        assert release_key("artuc", artuc.params, {**given, **changed}) != as_candidate
    assert release_key("rmr", rmr.params, from_rmr) != release_key("artuc", artuc.params,
                                                                  from_rmr)


@pytest.mark.slow
def test_candidates_share_comparators_with_the_metrics_of_a_fresh_computation() -> None:
    """RmR's and ArtUC's candidates at one k: three releases made (rmr, artuc,
    artuc-baseline), not six; every metric (the comparison table's rows included) equal to
    a comparison without the store."""
    from ehr_release.flows.compare import candidate_task
    from ehr_release.samples.sample import generate_sample

    dataset = generate_sample(120, seed=4)
    params = {"k": "5", "delta": "0.4", "seed": "3", "compare": "true",
              "config": str(EXAMPLE / "config.yaml")}
    candidates = [Candidate(0, "rmr", params), Candidate(1, "artuc", params)]
    store = ComparatorReleases(dataset)
    shared = [candidate_task.fn(c, dataset, None, "cmp-" + "ab" * 16, store)
              for c in candidates]
    fresh = [candidate_task.fn(c, dataset, None, "cmp-" + "ab" * 16) for c in candidates]
    assert all(o.verified for o in shared), [o.failures or o.error for o in shared]
    # rmr's candidate made its release, its evaluation artuc's and artuc-baseline's; the
    # artuc candidate and its evaluation took all three from the store.
    assert store.computed == 3
    assert [o.metrics for o in shared] == [o.metrics for o in fresh]
    assert "additional utility loss of rmr vs ArtUC (%)" in shared[1].metrics
