"""GenDiag on threads or worker processes returns what it returns in this process.

ArtUC's result must not depend on where GenDiag ran: the same seed gives the same release
bytes (clusters, generalized codes, suppressions) with and without workers.
"""

from __future__ import annotations

import multiprocessing
from functools import partial

import numpy as np
import pandas as pd
import pytest

from ehr_release.algorithms.artuc import artuc, artuc_unconstrained, baseline, release_files
from ehr_release.algorithms.artuc.artuc import in_process
from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.configuration.constraints import parse_config, rt_data
from ehr_release.model.dataset import Dataset
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.runtime import workers
from ehr_release.runtime.workers import (
    MIN_RECORDS,
    gendiag_parallel,
    gendiag_processes,
    gendiag_runner,
    gendiag_threads,
)


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    h = icd9_hierarchy()
    leaves = np.array(sorted(x for x in h.parent if h.is_leaf(x)), dtype=object)
    vocab = rng.choice(leaves, 300, replace=False)
    weight = (np.arange(len(vocab)) + 5.0) ** -1.1
    codes = [sorted(set(rng.choice(vocab, int(rng.integers(1, 9)), p=weight / weight.sum())))
             for _ in range(n)]
    demo = pd.DataFrame({"age": rng.integers(0, 90, n), "sex": rng.choice(["F", "M"], n)})
    config = parse_config({
        "attributes": {"age": {"type": "numerical", "domain": [0, 90]},
                       "sex": {"type": "categorical", "hierarchy": {"All": ["F", "M"]}}},
        "constraints": [{"name": "bands", "age": {"bands": 30, "from": 0, "to": 90},
                         "codes": "chapters"}]}, lambda ref: icd9_hierarchy())
    return rt_data(Dataset.from_records(codes, demo), config), config


@pytest.mark.parametrize("runner", [gendiag_processes, gendiag_threads])
def test_workers_give_the_same_release_as_this_process(runner) -> None:
    data, config = _data(600, seed=3)
    workers = partial(runner, workers=2)
    for algo in (artuc, artuc_unconstrained):
        here = algo(data, config, k=5, m=2, delta=0.2, epsilon=1e9,
                    rng=np.random.default_rng(1), gendiag_runner=in_process)
        there = algo(data, config, k=5, m=2, delta=0.2, epsilon=1e9,
                     rng=np.random.default_rng(1), gendiag_runner=workers)
        assert release_files(there) == release_files(here)
        assert there.suppressed_codes == here.suppressed_codes
    here = baseline(data, config, k=5, m=2, epsilon=1e9)
    there = baseline(data, config, k=5, m=2, epsilon=1e9, gendiag_runner=workers)
    assert release_files(there) == release_files(here)


def _table(records: int) -> CodeTable:
    return CodeTable(["a"], np.arange(records + 1, dtype=np.int64),
                     np.zeros(records, dtype=np.int64), np.zeros(1, dtype=np.int64))


def _chosen(monkeypatch, table: CodeTable, m: int) -> str:
    """Which runner ``gendiag_parallel`` enters for this table and m."""
    chosen = []
    for name in ("gendiag_threads", "gendiag_processes", "in_process"):
        real = getattr(workers, name)

        def spy(*args, _name=name, _real=real, **kwargs):
            chosen.append(_name)
            return _real(*args, **kwargs)
        monkeypatch.setattr(workers, name, spy)
    with gendiag_parallel(table, 5, m):
        pass
    return chosen[0]


def test_compiled_calls_share_threads_and_python_ones_need_big_data_for_processes(
        monkeypatch) -> None:
    assert _chosen(monkeypatch, _table(10), m=2) == "gendiag_threads"
    assert _chosen(monkeypatch, _table(MIN_RECORDS), m=2) == "gendiag_threads"
    # m = 3 runs the interpreted loop: threads would only take turns under the GIL
    assert _chosen(monkeypatch, _table(MIN_RECORDS - 1), m=3) == "in_process"
    assert _chosen(monkeypatch, _table(MIN_RECORDS), m=3) == "gendiag_processes"


def test_one_cpu_or_a_daemonic_process_such_as_a_dask_worker_stays_here(monkeypatch) -> None:
    monkeypatch.setattr(workers, "usable_cpus", lambda: 4)
    assert gendiag_runner() is gendiag_parallel
    monkeypatch.setattr(workers, "usable_cpus", lambda: 1)
    assert gendiag_runner() is in_process
    monkeypatch.setattr(workers, "usable_cpus", lambda: 4)
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True)
    assert gendiag_runner() is in_process


@pytest.mark.parametrize("runner", [in_process, gendiag_processes, gendiag_threads])
def test_every_runner_gives_the_uls_of_the_full_results(runner) -> None:
    """The partner search reads ``calls.uls``; each runner's must be its results' UL, in the
    batch's order (the thread runner deals the batch into shares by size)."""
    data, config = _data(400, seed=5)
    from ehr_release.algorithms.artuc.artuc import _setup

    _, table, _ = _setup(data, config, constrained=True)
    rng = np.random.default_rng(2)
    clusters = [np.sort(rng.choice(400, int(rng.integers(1, 200)), replace=False))
                for _ in range(9)]
    with runner(table, 5, 2) as calls:
        assert calls.uls(clusters) == [g.ul for g in calls.results(clusters)]
        assert calls.uls(clusters[:1]) == [calls.results(clusters[:1])[0].ul]
        assert calls.uls([]) == []


def test_shares_deal_every_position_once_largest_first() -> None:
    rows = [np.arange(n) for n in (5, 50, 1, 20, 20, 7)]
    shares = workers._shares(rows, 4)
    assert sorted(np.concatenate(shares).tolist()) == list(range(6))
    assert [s[0] for s in shares] == [1, 3, 4, 5]  # the four largest open the shares
    assert workers._shares(rows[:1], 8) == [np.array([0])]
