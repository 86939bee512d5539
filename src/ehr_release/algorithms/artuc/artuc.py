"""ArtUC (Algorithm 1) and its two comparators, Baseline and RmR, as pure functions.

All three share the phases and differ in what they take from the utility constraints:

* **ArtUC** groups records by constraint, clusters each group under NCP, merges by UL within
  δ, and generalizes codes only inside one constraint's code set;
* **RmR** does the same with no constraints (one group; any codes may be generalized
  together) — the (k, k^m) algorithm of Poulis et al. 2013 the paper compares against;
* **Baseline** publishes each group's constraint values as its demographics and runs
  GenDiag once per group.

A run that cannot meet δ (Step 16) or ε (Step 26) produces nothing and raises
:class:`~ehr_release.errors.ParameterError` naming the threshold to relax.

``gendiag_runner`` decides where GenDiag runs: by default in this process, one call after
another; :func:`ehr_release.workers.gendiag_processes` spreads each batch over worker
processes. The result does not depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import numpy as np

from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.formation import Cluster, form_clusters
from ehr_release.algorithms.artuc.gendiag import CodeGeneralization, gendiag
from ehr_release.algorithms.artuc.merging import GenDiagMany, merge_by_ul, merge_identical
from ehr_release.algorithms.artuc.space import DemographicSpace
from ehr_release.constraints import RTConfig, RTData, assign_parts, code_set_index
from ehr_release.errors import ConfigError, ParameterError

#: (code table, k, m) → a context in which a :data:`GenDiagMany` runs GenDiag on that table.
GenDiagRunner = Callable[[CodeTable, int, int], AbstractContextManager[GenDiagMany]]


@contextmanager
def in_process(table: CodeTable, k: int, m: int) -> Iterator[GenDiagMany]:
    """The default :data:`GenDiagRunner`: every call here, in order."""
    def many(rows: Sequence[np.ndarray]) -> list[CodeGeneralization]:
        return [gendiag(table, r, k=k, m=m) for r in rows]
    yield many


@dataclass(frozen=True)
class Anonymization:
    """An anonymized RT-dataset: clusters, their code generalizations, what was dropped."""

    algorithm: str
    space: DemographicSpace
    table: CodeTable
    clusters: list[Cluster]
    codes: list[CodeGeneralization]
    suppressed_rows: np.ndarray
    picks: list[int]

    @property
    def released(self) -> int:
        return sum(c.size for c in self.clusters)

    @property
    def ncp(self) -> float:
        """NCP(D̃): mean record NCP over the released records."""
        total = sum(c.size * self.space.ncp(c.box) for c in self.clusters)
        return total / self.released if self.released else 0.0

    @property
    def ul(self) -> float:
        """UL(D̃): mean record UL over the released records."""
        return sum(g.ul for g in self.codes) / self.released if self.released else 0.0

    @property
    def suppressed_codes(self) -> int:
        """Codes suppressed by GenDiag, summed over clusters (what ε bounds)."""
        return sum(g.suppressed for g in self.codes)


def _setup(data: RTData, config: RTConfig,
           constrained: bool) -> tuple[DemographicSpace, CodeTable, np.ndarray]:
    if constrained and not config.constraints:
        raise ConfigError("the configuration has no utility constraints (this algorithm needs "
                          "them; rmr runs without)")
    space = DemographicSpace(config, data)
    if constrained:
        groups = assign_parts(data, config)
        code_sets = code_set_index(config, {c for r in data.codes for c in r})
        return space, CodeTable.build(data.codes, code_sets), groups
    return space, CodeTable.build(data.codes), np.zeros(len(data.patient_ids), dtype=np.int64)


def _check_epsilon(codes: list[CodeGeneralization], epsilon: float) -> None:
    total = sum(g.suppressed for g in codes)
    if total > epsilon:
        raise ParameterError("epsilon", f"is below the {total} codes GenDiag had to suppress "
                             "(Step 26); raise ε or relax the utility constraints", epsilon)


def _cluster_and_merge(name: str, data: RTData, config: RTConfig, *, k: int, m: int,
                       delta: float, epsilon: float, rng: np.random.Generator,
                       constrained: bool, gendiag_runner: GenDiagRunner) -> Anonymization:
    space, table, groups = _setup(data, config, constrained)
    formed = form_clusters(space, groups, k, rng)
    clustered = sum(c.size for c in formed.clusters)
    ncp = sum(c.size * space.ncp(c.box) for c in formed.clusters) / max(clustered, 1)
    if ncp > delta + 1e-12:  # Step 16
        raise ParameterError("delta", f"is below the NCP {ncp:.4f} of the k-anonymous "
                             "clustering (Step 16); raise δ or lower k", delta)
    with gendiag_runner(table, k, m) as many:
        clusters, codes = merge_by_ul(space, merge_identical(formed.clusters), delta, many)
    _check_epsilon(codes, epsilon)
    return Anonymization(name, space, table, clusters, codes, formed.suppressed_rows,
                         formed.picks)


def artuc(data: RTData, config: RTConfig, *, k: int, m: int, delta: float, epsilon: float,
          rng: np.random.Generator, gendiag_runner: GenDiagRunner = in_process) -> Anonymization:
    """(k, k^m)-anonymize ``data`` satisfying the configuration's utility constraints."""
    return _cluster_and_merge("artuc", data, config, k=k, m=m, delta=delta, epsilon=epsilon,
                              rng=rng, constrained=True, gendiag_runner=gendiag_runner)


def rmr(data: RTData, config: RTConfig, *, k: int, m: int, delta: float, epsilon: float,
        rng: np.random.Generator, gendiag_runner: GenDiagRunner = in_process) -> Anonymization:
    """(k, k^m)-anonymize ``data`` under δ and ε, ignoring utility constraints."""
    return _cluster_and_merge("rmr", data, config, k=k, m=m, delta=delta, epsilon=epsilon,
                              rng=rng, constrained=False, gendiag_runner=gendiag_runner)


def baseline(data: RTData, config: RTConfig, *, k: int, m: int, epsilon: float,
             gendiag_runner: GenDiagRunner = in_process) -> Anonymization:
    """Pre-generalize each group to its constraint's values, then GenDiag per group."""
    space, table, groups = _setup(data, config, constrained=True)
    parts = config.demographic_parts()
    clusters, dropped = [], []
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        if len(rows) < k:
            dropped.append(rows)
        else:
            clusters.append(Cluster(rows, space.element_box(parts[int(g)]), int(g)))
    with gendiag_runner(table, k, m) as many:
        codes = many([c.rows for c in clusters])
    _check_epsilon(codes, epsilon)
    out = np.sort(np.concatenate(dropped)) if dropped else np.empty(0, dtype=np.int64)
    return Anonymization("artuc-baseline", space, table, clusters, codes, out, [])
