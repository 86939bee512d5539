"""Task-run names and tags that say what ran: ``anonymize[disassociation k=5 m=2]``.

Prefect names task runs ``<task>-<3 hex digits>`` unless told otherwise, which tells a
reader of the UI nothing. Only the run *name* changes: the task's ``name`` (part of every
cache key, see :mod:`ehr_release.tasks.caching`) stays as it was, so a resumed run still
finds its cached stages. A parameter that names a file on the site's machine (ArtUC's
``config``, a population) is shown by its file name: the UI is no place for the site's
folders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any


def _shown(value: Any) -> str:
    """A parameter's value for a name: a path by its last part."""
    text = str(value)
    return PurePath(text).name or text if "/" in text or "\\" in text else text


def describe(algorithm: str, params: Mapping[str, Any]) -> str:
    """``disassociation k=5 m=2``: the algorithm and its given parameters, sorted by name."""
    shown = " ".join(f"{name}={_shown(value)}" for name, value in sorted(params.items()))
    return f"{algorithm} {shown}".strip()


def stage_run_name(stage: str) -> Callable[..., str]:
    """A ``task_run_name`` callable for a stage task taking the release ``plan``."""
    def name(parameters: dict[str, Any]) -> str:
        plan = parameters["plan"]
        return f"{stage}[{describe(plan.algorithm, plan.request.params)}]"

    name.__name__ = f"{stage}_run_name"
    return name


def request_run_name(stage: str) -> Callable[..., str]:
    """A ``task_run_name`` callable for a stage task taking the ``request`` (ingest)."""
    def name(parameters: dict[str, Any]) -> str:
        request = parameters["request"]
        return f"{stage}[{describe(request.algorithm, request.params)}]"

    name.__name__ = f"{stage}_run_name"
    return name


def candidate_run_name(parameters: dict[str, Any]) -> str:
    """``candidate[3: disassociation k=5 m=2]`` for one comparison candidate."""
    candidate = parameters["candidate"]
    return f"candidate[{candidate.index}: {describe(candidate.algorithm, candidate.params)}]"


def run_tags(run_id: str, algorithm: str, source: str) -> list[str]:
    """The tags of a run's flow runs, so the UI filters by each: ``algorithm:…``,
    ``run:…``, ``source:…`` (the population the extract is registered under)."""
    return [f"algorithm:{algorithm}", f"run:{run_id}", f"source:{source}"]


def comparison_tags(comparison_id: str, algorithms: list[str], source: str) -> list[str]:
    """The tags of a comparison's flow run: one ``algorithm:…`` per family compared, so a
    filter on an algorithm finds the comparisons that tried it as well as its runs."""
    return sorted({f"algorithm:{a}" for a in algorithms}
                  | {f"comparison:{comparison_id}", f"source:{source}"})
