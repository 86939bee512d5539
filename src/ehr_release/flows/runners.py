"""Which Prefect task runner a flow uses: threads (default) or Dask.

The runner spec is part of the request (its grammar is :func:`ehr_release.planning.request.
check_runner_spec`); this module turns a checked spec into a Prefect task runner.
"""

from __future__ import annotations

from typing import Any

from ehr_release.planning.request import check_runner_spec


def make_task_runner(spec: str) -> Any:
    """The task runner a spec names (imports Dask only when asked for)."""
    kind, _, count = check_runner_spec(spec).partition(":")
    if kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=int(count) if count else None)
    from prefect_dask import DaskTaskRunner

    if kind == "dask":
        kwargs: dict[str, Any] = {"processes": True, "threads_per_worker": 1}
        if count:
            kwargs["n_workers"] = int(count)
        return DaskTaskRunner(cluster_kwargs=kwargs)
    return DaskTaskRunner(address=spec)
