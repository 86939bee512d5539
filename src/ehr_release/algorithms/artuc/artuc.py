"""ArtUC (Algorithm 1) and its two comparators, Baseline and RmR, as pure functions.

All three share the phases and differ in what they take from the utility constraints:

* **ArtUC** groups records by constraint, clusters each group under NCP, merges by UL within
  δ, and generalizes codes only inside one constraint's code set;
* **RmR** does the same with no constraints (one group; any codes may be generalized
  together) — the (k, k^m) algorithm of Poulis et al. 2013 the paper compares against;
* **Baseline** publishes each group's constraint values as its demographics and runs
  GenDiag once per group.

A run that cannot meet δ (Step 16) or ε (Step 26) produces nothing and raises
:class:`~ehr_release.core.errors.ParameterError` naming the threshold to relax — unless ArtUC
runs as **Algorithm 2** (§4.3, ``relax=True``): the data owner's judgements "is this NCP /
this number of suppressed codes acceptable?" become the ceilings ``relax_delta`` and
``relax_epsilon``; δ is relaxed (Step 3: the clustering's NCP; Step 14: merges above δ,
made only while more than ε codes are suppressed) before ε is (Step 17), and every
relaxation made is returned in :attr:`Anonymization.relaxations`. The utility constraints
(Requirement 3) and (k, k^m)-anonymity are never relaxed: the paper's Algorithm 2 relaxes
Requirements 1 and 4 only.

``gendiag_runner`` decides where GenDiag runs: by default in this process, one call after
another; :func:`ehr_release.runtime.workers.gendiag_processes` spreads each batch over worker
processes. The result does not depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ehr_release.algorithms.artuc.codes import CodeTable
from ehr_release.algorithms.artuc.formation import Cluster, form_clusters
from ehr_release.algorithms.artuc.gendiag import CodeGeneralization, ULBatch, gendiag
from ehr_release.algorithms.artuc.merging import (
    GenDiagCalls,
    MergeOrder,
    Relax,
    StopRule,
    merge_by_ul,
    merge_identical,
)
from ehr_release.algorithms.artuc.space import DemographicSpace
from ehr_release.configuration.constraints import RTConfig, RTData, assign_parts, code_set_index
from ehr_release.core.errors import ConfigError, ParameterError

#: (code table, k, m) → a context in which :class:`GenDiagCalls` run GenDiag on that table.
GenDiagRunner = Callable[[CodeTable, int, int], AbstractContextManager[GenDiagCalls]]


@contextmanager
def in_process(table: CodeTable, k: int, m: int) -> Iterator[GenDiagCalls]:
    """The default :data:`GenDiagRunner`: every call here, in order."""
    def many(rows: Sequence[np.ndarray]) -> list[CodeGeneralization]:
        return [gendiag(table, r, k=k, m=m) for r in rows]

    def uls(rows: Sequence[np.ndarray]) -> list[float]:
        batch = ULBatch(table, rows, k, m)
        batch.run(np.arange(len(rows)))
        return batch.uls()
    yield GenDiagCalls(many, uls)


@dataclass(frozen=True)
class Relaxation:
    """One relaxation Algorithm 2 applied: which requirement of Problem 1, at which step,
    the bound asked for and the value the result has (``merges``: merges above δ)."""

    requirement: Literal["delta", "epsilon"]
    step: int
    bound: float
    reached: float
    merges: int = 0

    def describe(self) -> str:
        if self.requirement == "epsilon":
            return (f"ε relaxed (Algorithm 2, step {self.step}): {self.reached:g} codes "
                    f"suppressed, above ε = {self.bound:g}")
        how = (f"{self.merges} cluster merges accepted above δ while more than ε codes were "
               "suppressed" if self.step == 14 else "the k-anonymous clustering alone")
        return (f"δ relaxed (Algorithm 2, step {self.step}): NCP {self.reached:.4f} above "
                f"δ = {self.bound:g} ({how})")


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
    #: What Algorithm 2 relaxed, in the order it did (empty for Algorithm 1).
    relaxations: tuple[Relaxation, ...] = ()

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
                          "them; artuc-unconstrained runs without)")
    space = DemographicSpace(config, data)
    weights = config.code_weights()
    if constrained:
        groups = assign_parts(data, config)
        code_sets = code_set_index(config, {c for r in data.codes for c in r})
        return space, CodeTable.build(data.codes, code_sets, weights), groups
    return (space, CodeTable.build(data.codes, weight_of=weights),
            np.zeros(len(data.patient_ids), dtype=np.int64))


def _check_epsilon(codes: list[CodeGeneralization], epsilon: float) -> None:
    total = sum(g.suppressed for g in codes)
    if total > epsilon:
        raise ParameterError("epsilon", f"is below the {total} codes GenDiag had to suppress "
                             "(Step 26); raise ε or relax the utility constraints", epsilon)


@dataclass(frozen=True)
class Relaxing:
    """Algorithm 2's ceilings: the largest NCP and number of suppressed codes the data owner
    accepts (the paper asks the owner at each step; here they are given up front)."""

    delta_max: float
    epsilon_max: float


def _cluster_and_merge(name: str, data: RTData, config: RTConfig, *, k: int, m: int,
                       delta: float, epsilon: float, rng: np.random.Generator,
                       constrained: bool, gendiag_runner: GenDiagRunner,
                       stop: StopRule = "exhaust", order: MergeOrder = "paper",
                       relaxing: Relaxing | None = None) -> Anonymization:
    space, table, groups = _setup(data, config, constrained)
    formed = form_clusters(space, groups, k, rng)
    clustered = sum(c.size for c in formed.clusters)
    ncp = sum(c.size * space.ncp(c.box) for c in formed.clusters) / max(clustered, 1)
    relaxations: list[Relaxation] = []
    if ncp > delta + 1e-12:  # Step 16 (Algorithm 2: Step 3)
        if relaxing is None:
            raise ParameterError("delta", f"is below the NCP {ncp:.4f} of the k-anonymous "
                                 "clustering (Step 16); raise δ or lower k", delta)
        if ncp > relaxing.delta_max + 1e-12:
            raise ParameterError("relax_delta", f"is below the NCP {ncp:.4f} of the "
                                 "k-anonymous clustering (Algorithm 2, step 3); raise it or "
                                 "lower k", relaxing.delta_max)
        relaxations.append(Relaxation("delta", 3, delta, ncp))
    relax = None if relaxing is None else Relax(epsilon, max(delta, relaxing.delta_max))
    with gendiag_runner(table, k, m) as calls:
        merged = merge_by_ul(space, merge_identical(formed.clusters), delta, calls, stop=stop,
                             order=order, relax=relax)
    clusters, codes = merged.clusters, merged.codes
    if merged.beyond_delta:
        final = sum(c.size * space.ncp(c.box) for c in clusters) / max(clustered, 1)
        relaxations.append(Relaxation("delta", 14, delta, final, merged.beyond_delta))
    if relaxing is None:
        _check_epsilon(codes, epsilon)
    elif merged.suppressed > epsilon:  # Algorithm 2, steps 17–20
        if merged.suppressed > relaxing.epsilon_max:
            raise ParameterError("relax_epsilon", f"is below the {merged.suppressed} codes "
                                 "GenDiag had to suppress after merging up to relax_delta "
                                 "(Algorithm 2, step 19); raise it or relax_delta",
                                 relaxing.epsilon_max)
        relaxations.append(Relaxation("epsilon", 17, epsilon, merged.suppressed))
    return Anonymization(name, space, table, clusters, codes, formed.suppressed_rows,
                         formed.picks, tuple(relaxations))


def artuc(data: RTData, config: RTConfig, *, k: int, m: int, delta: float, epsilon: float,
          rng: np.random.Generator, gendiag_runner: GenDiagRunner = in_process,
          stop: StopRule = "exhaust", order: MergeOrder = "paper",
          relaxing: Relaxing | None = None) -> Anonymization:
    """(k, k^m)-anonymize ``data`` satisfying the configuration's utility constraints.

    ``stop`` is the merging stop rule (:mod:`~ehr_release.algorithms.artuc.merging`:
    ``"exhaust"``, the default, or the paper's ``"paper"``); ``order`` is which cluster
    Step 19 takes first (the paper's ``"paper"``, the default, or the deviation
    ``"suppression-first"``); ``relaxing`` runs Algorithm 2 with the owner's ceilings
    instead of failing at Step 16 or 26.
    """
    return _cluster_and_merge("artuc", data, config, k=k, m=m, delta=delta, epsilon=epsilon,
                              rng=rng, constrained=True, gendiag_runner=gendiag_runner,
                              stop=stop, order=order, relaxing=relaxing)


def artuc_unconstrained(data: RTData, config: RTConfig, *, k: int, m: int, delta: float,
                        epsilon: float, rng: np.random.Generator,
                        gendiag_runner: GenDiagRunner = in_process) -> Anonymization:
    """(k, k^m)-anonymize ``data`` under δ and ε, ignoring utility constraints.

    ArtUC's own steps without its utility constraints: a relaxation of ArtUC's problem,
    registered as ``artuc-unconstrained``. It is not the RmR of Poulis et al. (2013) the
    paper compares against; that one is :mod:`ehr_release.algorithms.rmr`.
    """
    return _cluster_and_merge("artuc-unconstrained", data, config, k=k, m=m, delta=delta,
                              epsilon=epsilon, rng=rng, constrained=False,
                              gendiag_runner=gendiag_runner)


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
    with gendiag_runner(table, k, m) as calls:
        codes = calls.results([c.rows for c in clusters])
    _check_epsilon(codes, epsilon)
    out = np.sort(np.concatenate(dropped)) if dropped else np.empty(0, dtype=np.int64)
    return Anonymization("artuc-baseline", space, table, clusters, codes, out, [])
