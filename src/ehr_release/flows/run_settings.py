"""The Prefect settings the flows we call ourselves run under.

Two settings, entered around each flow call: in the release flow's own process
(:mod:`ehr_release.flows.launch`) and around the publishing and comparison flows of a deciding
process (:func:`ehr_release.service.prefect_api`). A deployment's run (``prefect.yaml``) is
started by a Prefect worker and runs under that worker's settings, heartbeats included.

* ``PREFECT_API_URL``: the API that process found (its local server, or the one configured).
* No flow-run heartbeats. Prefect 3.8 sends one every 180 s from a thread that sleeps in
  whole seconds, and a sync flow joins that thread as it ends: every flow run returned up
  to a second after its last task (a trivial flow: 1.10 s, 0.09 s without them; issue 37).
  That second fell on every ``approve`` the reviewer waits for and on every comparison. The
  heartbeats only feed Prefect's detection of crashed runs, which we do not use: a run whose
  flow died shows as ``stalled`` by its own lease in our database
  (:mod:`ehr_release.storage.run_view`), whatever Prefect believes.

Prefect reads the heartbeat period when a flow run starts, from the settings in force in
that thread. An environment variable cannot turn it off (the variable must hold a number
of at least 30), hence a settings context.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def flow_run_settings(api_url: str) -> Iterator[None]:
    """Run the block's flows against ``api_url``, without heartbeats (see the module doc)."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    with temporary_settings(updates={PREFECT_API_URL: api_url,
                                     PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield
