"""Tags on a run's flow run: ``algorithm:…``, ``run:…``, ``source:…``
(:func:`ehr_release.tasks.naming.run_tags`), so Prefect's UI filters a site's runs by
algorithm, by run and by the population they draw from; a comparison's flow run has
``comparison:…`` and one ``algorithm:…`` per family compared
(:func:`ehr_release.tasks.naming.comparison_tags`).

The flow run exists before its body starts (whoever called the flow made it), so its tags
are added through the API. Tags only help a reader: failing to set them never fails a run.

Task runs are deliberately *not* tagged. Prefect 3.8 treats every task-run tag as a
possible concurrency limit: each tagged task run asks the server for a lease on
``tag:<tag>`` before it starts and renews it while it runs. That is three more round trips
per task, and under load (eight first runs on one SQLite-backed server, CI of stop 39) one
lease request failed and failed the whole release with ``ConcurrencySlotAcquisitionError``.
A task run is found through its flow run (the UI lists a flow run's task runs, and its name
says the stage and the algorithm: :func:`ehr_release.tasks.naming.stage_run_name`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

from prefect import get_client
from prefect.runtime import flow_run

from ehr_release.tasks.naming import run_tags


def tag_flow_run(found: list[str]) -> list[str]:
    """Add ``found`` to the current flow run's tags (none outside a flow run)."""
    current = flow_run.get_id()
    if current:
        with suppress(Exception), get_client(sync_client=True) as client:
            known = client.read_flow_run(current).tags
            client.update_flow_run(current, tags=sorted(set(known) | set(found)))
    return found


@contextmanager
def tagged(run_id: str, algorithm: str, source: str) -> Iterator[list[str]]:
    """Tag the current flow run (not its task runs: see the module's docstring)."""
    yield tag_flow_run(run_tags(run_id, algorithm, source))
