"""Tags on a run's flow run and on each of its task runs: ``algorithm:…``, ``run:…``,
``source:…`` (:func:`ehr_release.tasks.naming.run_tags`), so Prefect's UI filters a site's
runs by algorithm, by run and by the population they draw from.

The flow run exists before its body starts (whoever called the flow made it), so its tags
are added through the API; the task runs made inside the block take them from Prefect's
``tags`` context. Tags only help a reader: failing to set them never fails a run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

from prefect import get_client, tags
from prefect.runtime import flow_run

from ehr_release.tasks.naming import run_tags


@contextmanager
def tagged(run_id: str, algorithm: str, source: str) -> Iterator[list[str]]:
    """Tag the current flow run and every task run started in the block."""
    found = run_tags(run_id, algorithm, source)
    current = flow_run.get_id()
    if current:
        with suppress(Exception), get_client(sync_client=True) as client:
            known = client.read_flow_run(current).tags
            client.update_flow_run(current, tags=sorted(set(known) | set(found)))
    with tags(*found):
        yield found
