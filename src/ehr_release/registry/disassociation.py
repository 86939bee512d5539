"""Registry entry ``disassociation``: k^m-anonymity for diagnosis codes (issue 3).

Glue only: it resolves the policy string (:func:`~ehr_release.configuration.policies.
resolve_policy` reads a YAML file when it names one — the algorithm itself does no I/O), runs
VerPart batches, the verifier's counting and the evaluation's reconstructions through the
flow's task runner when called inside a flow, and wires the family's shared entry points:
the independent verifier, the closed-world format declaration, the attack audit and the
utility evaluation.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from functools import cache
from typing import TYPE_CHECKING, Any

from ehr_release.configuration.policies import (
    POLICY_SYNTAX,
    parse_policy_spec,
    resolve_policy,
)
from ehr_release.core.errors import ParameterError
from ehr_release.parameters.params import Interval, Param, Satisfies
from ehr_release.privacy.formats.disassociation import SCHEMA, count_records
from ehr_release.registry import AlgorithmEntry, ReleaseFiles, lazy

if TYPE_CHECKING:  # annotations only: parameters are checked before pandas loads
    import numpy as np

    from ehr_release.model.dataset import Dataset

#: Below this many VerPart batches the task runner's overhead is not worth it.
MIN_PARALLEL_BATCHES = 2


def _policy_syntax_ok(value: str) -> bool:
    try:
        parse_policy_spec(value)
    except ParameterError:
        return False
    return True


PARAMS = (
    Param("k", int, "every itemset of ≤ m codes is hidden among ≥ k records",
          check=Interval(int, 2), example="5"),
    Param("m", int, "the attacker knows up to m codes of a patient", default=2,
          check=Interval(int, 1)),
    Param("policy", str, f"utility policy: {POLICY_SYNTAX}", default="hierarchy:3digit",
          check=Satisfies(_policy_syntax_ok, f"must be {POLICY_SYNTAX}")),
    Param("max_cluster_size", int,
          "HorPart stops splitting a partition smaller than this: the paper's maxClusterSize "
          "(Loukides et al. JBI 2014, worked example, footnote 4: any value ≥ k; empty = 2k, "
          "the paper's choice and today's releases)",
          default=None, check=Interval(int, 2, note="and ≥ k")),
    Param("seed", int, "accepted for reproducible examples; draws nothing: the subrecord "
          "order inside a chunk is a documented rule the verifier replays (issue 32)",
          default=None),
)


def _through_runner(task_name: str) -> Any:
    """A ``map(fn, items)`` that runs items through the current flow's task runner.

    Outside a flow, on the thread runner, or with fewer than ``MIN_PARALLEL_BATCHES`` items,
    it is a plain loop.
    Prefect is only consulted if it is already loaded: a process that never imported it is
    not running a flow, and importing it would cost seconds.
    """
    def map_items(fn: Any, items: list[Any]) -> list[Any]:
        if len(items) < MIN_PARALLEL_BATCHES or not _runner_runs_processes():
            return [fn(x) for x in items]
        with _parent_without_parameters():
            futures = [_mapped_task(task_name).submit(fn, _Sealed(x)) for x in items]
        return [f.result() for f in futures]
    return map_items


def _parent_without_parameters() -> Any:
    """The calling task's run context minus its parameters, for the submissions.

    Prefect ships the parent task's context, parameters included, with every task it sends
    to a worker process — here the whole dataset and release, once per item (measured: about
    10 s per reconstruction at 1M records). The children never read them.
    """
    from prefect.context import TaskRunContext

    parent = TaskRunContext.get()
    return parent.model_copy(update={"parameters": {}}) if parent else nullcontext()


def _runner_runs_processes() -> bool:
    """True inside a flow whose task runner has worker processes (Dask).

    This work is pure Python: under the GIL a thread pool only adds contention (measured:
    evaluate 32 s serial vs 43 s on five threads at 100K records), so with the default
    thread runner it stays in this thread.
    """
    context = sys.modules.get("prefect.context")
    flow_run = context.FlowRunContext.get() if context is not None else None
    if flow_run is None or flow_run.task_runner is None:
        return False
    from prefect.task_runners import ThreadPoolTaskRunner

    return not isinstance(flow_run.task_runner, ThreadPoolTaskRunner)


@cache
def _mapped_task(name: str) -> Any:
    """The Prefect task wrapping one item (built on first use: Prefect is heavy)."""
    from prefect import task
    from prefect.cache_policies import NO_CACHE

    return task(_run_item, name=name, cache_policy=NO_CACHE, persist_result=False)


class _Sealed:
    """Hides an item from Prefect's parameter introspection.

    Prefect walks every nested list of a task argument looking for futures — seconds per
    item at 100K records, minutes per run at 1M. An object that is neither a collection nor
    a dataclass is passed through untouched (``prefect.quote`` does not survive Dask here).
    """

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item


def _run_item(fn: Any, sealed: _Sealed) -> Any:
    return fn(sealed.item)


_task_runner_map: Any = _through_runner("disassociation-verpart-batch")
_reconstructions_map: Any = _through_runner("disassociation-reconstruction")
_verify_counts_map: Any = _through_runner("disassociation-verify-counts")


# The anonymizer, verifier, attack and evaluation are imported where they are used: a
# refused request needs none of them, and the CLI answers it before they would load.
def anonymize(dataset: Dataset, params: dict[str, Any],
              rng: np.random.Generator) -> ReleaseFiles:
    from ehr_release.algorithms.disassociation import RELEASE_FILE, disassociate_dataset

    policy = resolve_policy(params["policy"], dataset)
    result = disassociate_dataset(dataset, params["k"], params["m"], policy, rng,
                                  max_cluster_size=params.get("max_cluster_size"),
                                  map_batches=_task_runner_map)
    return {RELEASE_FILE: result.release.to_bytes()}


ENTRY = AlgorithmEntry(
    name="disassociation",
    summary="Disassociation (Loukides et al., JBI 2014): clusters of similar records whose "
            "codes are split into shuffled k^m-anonymous chunks; no code is generalized or "
            "suppressed",
    privacy_model="k^m-anonymity (Guarantee 1): an attacker knowing up to m codes of a "
                  "patient finds ≥ k matching records in some reconstruction of the release",
    params=PARAMS,
    anonymize=anonymize,
    verify=lazy("ehr_release.privacy.disassociation", "verify", map_fn=_verify_counts_map),
    evaluate=lazy("ehr_release.utility.disassociation", "evaluate",
                  map_fn=_reconstructions_map),
    prepare_evaluation=lazy("ehr_release.utility.disassociation", "prepare_evaluation"),
    headline_loss="ARE W2 (estimator)",
    schema=SCHEMA,
    attack=lazy("ehr_release.privacy.attacks.disassociation", "attack"),
    count_records=count_records,
)
