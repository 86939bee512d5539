"""Task-run names that say what ran: ``anonymize[disassociation k=5 m=2]``.

Prefect names task runs ``<task>-<3 hex digits>`` unless told otherwise, which tells a
reader of the UI nothing. Only the run *name* changes: the task's ``name`` (part of every
cache key, see :mod:`ehr_release.tasks.caching`) stays as it was, so a resumed run still
finds its cached stages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def describe(algorithm: str, params: Mapping[str, Any]) -> str:
    """``disassociation k=5 m=2``: the algorithm and its given parameters, sorted by name."""
    shown = " ".join(f"{name}={value}" for name, value in sorted(params.items()))
    return f"{algorithm} {shown}".strip()


def stage_run_name(stage: str) -> Callable[..., str]:
    """A ``task_run_name`` callable for a stage task taking the release ``plan``."""
    def name(parameters: dict[str, Any]) -> str:
        plan = parameters["plan"]
        return f"{stage}[{describe(plan.algorithm, plan.request.params)}]"

    name.__name__ = f"{stage}_run_name"
    return name


def candidate_run_name(parameters: dict[str, Any]) -> str:
    """``candidate[3: disassociation k=5 m=2]`` for one comparison candidate."""
    candidate = parameters["candidate"]
    return f"candidate[{candidate.index}: {describe(candidate.algorithm, candidate.params)}]"
