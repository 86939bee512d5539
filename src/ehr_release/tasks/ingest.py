"""Ingest: resolve the request into its :class:`~ehr_release.planning.plan.ReleasePlan` (typed
parameters, the validated extract, fingerprints), register the dataset and open the run.

The work is done by plain functions the CLI also calls before Prefect starts
(:func:`ehr_release.planning.plan.make_plan`, :mod:`ehr_release.planning.intake`); this task adds
the stage
artifact and the retry policy. Every later task receives the plan it returns.

The flow process may have made the plan already while it waited for the CLI
(:mod:`ehr_release.flows.head_start`): it offers it with :func:`offer_plan`, and the task
takes it, once, only for the very request it was made from.
"""

from __future__ import annotations

import time

from prefect import task

from ehr_release.planning.intake import load_request_dataset, register_run
from ehr_release.planning.plan import ReleasePlan, make_plan
from ehr_release.planning.request import ReleaseRequest, check_data_use_policy
from ehr_release.storage import runs
from ehr_release.tasks.artifacts import md_table, stage_artifact
from ehr_release.tasks.logs import plural, since, stage_log
from ehr_release.tasks.naming import request_run_name
from ehr_release.tasks.redaction import redacted
from ehr_release.tasks.retry import is_transient

__all__ = ["ingest_task", "load_request_dataset", "offer_plan", "register_run"]

#: A plan this process made before the flow started, for the request it was made from.
_offered: list[ReleasePlan] = []


def offer_plan(plan: ReleasePlan) -> None:
    """Hand the ingest stage a plan this process made itself (it replaces any other)."""
    _offered[:] = [plan]


def _made_plan(request: ReleaseRequest) -> ReleasePlan:
    """The offered plan if it was made from exactly ``request`` (taken once), else a new
    one: read and check the input now."""
    offered = _offered.pop() if _offered else None
    if offered is not None and offered.request == request:
        return offered
    return make_plan(request)


# Raw patient data must never land in Prefect's result storage: no caching, no persistence.
@task(name="ingest", task_run_name=request_run_name("ingest"), retries=2,
      retry_delay_seconds=1, retry_condition_fn=is_transient, persist_result=False,
      cache_policy=None)
@redacted
def ingest_task(request: ReleaseRequest) -> ReleasePlan:
    """Validate parameters and input, then register the dataset and the run (``requested``).

    Parameters are checked before any row is stored, so a bad request leaves no run behind.
    If the run already exists (a resumed run after a crash) it must match this request.
    A run this task creates (started by a deployment, not the CLI) must meet the site's
    data-use policy first; a run that exists was checked when it was created.
    """
    started = time.perf_counter()
    if runs.find_run(request.run_id) is None:
        check_data_use_policy(request)
    plan = _made_plan(request)
    dataset, fingerprint = plan.dataset, plan.fingerprint
    codes = dataset.diagnoses["code"].nunique()
    stage_artifact("ingest", request.run_id, md_table(
        [("patients", str(dataset.n_patients)), ("diagnosis rows", str(len(dataset.diagnoses))),
         ("distinct codes", str(codes)),
         ("longitudinal", str(dataset.is_longitudinal)), ("SHA-256", fingerprint)],
        ("dataset", "value")))
    register_run(request, dataset, fingerprint)
    stage_log("ingest", f"{plural(dataset.n_patients, 'patient')}, "
                        f"{plural(len(dataset.diagnoses), 'diagnosis row')}, "
                        f"{plural(codes, 'distinct code')}"
                        f"{' (longitudinal)' if dataset.is_longitudinal else ''}; extract "
                        f"SHA-256 {fingerprint[:12]}…; checked and registered in "
                        f"{since(started)}")
    return plan
