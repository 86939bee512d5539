"""``governed_release``: the deployment's entry point, honouring the request's task runner.

A flow's task runner is fixed when the flow starts, and a deployment run started from the
Prefect UI or API starts with the decorator's default (threads). The CLI avoids that by
calling ``release_flow.with_options(task_runner=...)``; a worker cannot. So the deployment
runs this thin parent, which starts ``release_flow`` as a subflow on the runner the request
names (``threads``, ``dask:N`` or a scheduler address). Like a CLI-started run, it ends with
the run parked for its reviewer; the ``publish-release`` deployment (or ``ehr-release
approve``, or the dashboard) publishes it once a decision is recorded.
"""

from __future__ import annotations

from prefect import flow

from ehr_release.flows.release import release_flow
from ehr_release.flows.runners import make_task_runner
from ehr_release.planning.request import ReleaseRequest
from ehr_release.tasks.redaction import redacted


@flow(name="governed_release", persist_result=False)
@redacted
def governed_release(request: ReleaseRequest) -> str:
    """Run one governed release on the task runner ``request.task_runner`` names."""
    runner = make_task_runner(request.task_runner)
    return release_flow.with_options(task_runner=runner)(request)
