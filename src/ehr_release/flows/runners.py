"""Which Prefect task runner a flow uses: threads (default) or Dask.

The spec string travels in the request, so a resumed run uses the runner it started with:

* ``threads`` or ``threads:N`` — Prefect's thread pool (N workers); enough for one machine;
* ``dask`` or ``dask:N`` — a local Dask cluster of N worker processes (default: one per core)
  started for the flow and closed after it;
* ``tcp://host:8786`` (or ``tls://``) — an existing ``distributed`` scheduler. Patient data
  travels to its workers: use only a cluster inside the data's trust boundary, with TLS.
"""

from __future__ import annotations

import re
from typing import Any

from ehr_release.errors import ParameterError

RUNNER_PATTERN = r"^(threads|dask)(:[1-9][0-9]{0,2})?$|^(tcp|tls)://[A-Za-z0-9.\-\[\]:]+$"
_SPEC = re.compile(RUNNER_PATTERN)


def check_runner_spec(spec: str) -> str:
    if not _SPEC.match(spec):
        raise ParameterError("task_runner", "must be threads[:N], dask[:N] or "
                             "tcp://HOST:PORT of a Dask scheduler", spec)
    return spec


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
