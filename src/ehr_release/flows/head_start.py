"""What the flow process does while it waits for ``go``: read the input, load the stages.

The CLI starts the flow process (:mod:`ehr_release.flows.launch`) before it has finished
checking the request, and writes the request file before it starts it. Once Prefect is
loaded and its API found, the process would only wait while the CLI reads the input in full
(seconds for 58,302 records); on a machine with a second CPU that wait can do work the flow
needs anyway, so it does not wait for it after ``go`` (issue 18 goal 1):

* it makes the run's plan (:func:`ehr_release.planning.plan.make_plan`, as the ingest stage does)
  while the CLI reads the input too. On a machine with a second CPU the input itself was
  read and checked by the flow's second process (:mod:`ehr_release.tasks.aside`), which
  the launcher spawns before it loads Prefect, so the read overlaps that import; this
  process takes that dataset only if the request the second process read is this very
  request, and reads the input itself otherwise. The plan is only *offered* to the ingest
  stage, which takes it when the request it is told to run after ``go`` is the very
  request this plan was made from, and otherwise reads the input again. The plan comes
  from the flow's own processes, reads and checks, so the stage still trusts no caller; a
  file changed between this read and the CLI's fails the run, as a change between the two
  reads always did (the fingerprints differ);
* it imports the modules the stages load on first use — the algorithm's verifier, attack
  and evaluation, Prefect's engines and, without a second process, matplotlib and
  WeasyPrint. The second process evaluates the candidate while the flow verifies it, and
  renders the certificate while the flow renders the datasheet; it imports what it needs
  meanwhile. The flow's own certificate modules (WeasyPrint: 0.4-1.1 CPU s) then load
  later, not here, where the flow process is what the run waits for once the CLI has read
  the input: while it waits for that evaluation if the evaluation is still running then
  (:func:`load_certificate_modules`), else when the datasheet is rendered, while the second
  process renders the certificate.

Nothing here writes anything or talks to the database; a failure of any of it (a bad file,
a missing request) is left for the flow to meet and report as before, so it is silenced.
A request refused by the CLI ends the process without running anything, as before.
"""

from __future__ import annotations

import importlib
from contextlib import suppress
from pathlib import Path

from ehr_release.planning.request import ReleaseRequest

#: Modules every release loads in its stages, not at the flow's import: the Prefect engines
#: the first flow and task call load.
STAGE_MODULES = ("prefect.flow_engine", "prefect.task_engine")
#: The certificate's renderer and chart library.
CERTIFICATE_MODULES = ("ehr_release.utility.plotting", "weasyprint", "ehr_release.tasks.certify")


def head_start(request_path: Path) -> None:
    """Read and check the input of the request at ``request_path`` and offer the plan to
    the ingest stage; load the modules the stages need. Never raises (see module doc)."""
    request = None
    with suppress(Exception):
        request = ReleaseRequest.model_validate_json(request_path.read_text())
    aside = False
    if request is not None:
        from ehr_release.planning.plan import make_plan
        from ehr_release.tasks.aside import take_input
        from ehr_release.tasks.ingest import offer_plan

        with suppress(Exception):
            aside = work_aside(request, request_path)
        dataset, fingerprint = (take_input(request) if aside else None) or (None, None)
        with suppress(Exception):
            offer_plan(make_plan(request, dataset, fingerprint=fingerprint))
    load_stage_modules(request, certificate=not aside)


def work_aside(request: ReleaseRequest, request_path: Path) -> bool:
    """Keep (or spawn) the second process (:mod:`ehr_release.tasks.aside`) when
    ``request``'s flow runs its tasks on threads; a Dask runner spreads the stages over its
    workers, and the process is stopped. True if it runs."""
    from ehr_release.tasks.aside import start_worker, stop_worker

    if request.task_runner.partition(":")[0] != "threads":
        stop_worker()
        return False
    return start_worker(request_path)


def load_stage_modules(request: ReleaseRequest | None, *, certificate: bool = True) -> None:
    """Import what the stages of ``request``'s algorithm import on first use (the
    certificate's modules too, unless ``certificate`` is false)."""
    names = list(STAGE_MODULES) + (list(CERTIFICATE_MODULES) if certificate else [])
    if request is not None:
        from ehr_release.registry import get as get_algorithm

        with suppress(Exception):
            names += get_algorithm(request.algorithm).stage_modules()
    _load(names)


#: What the datasheet needs, rendered by the flow process beside the certificate.
DATASHEET_MODULES = ("weasyprint", "ehr_release.tasks.certify")


def load_certificate_modules() -> None:
    """Import what the certify stage renders with in this process (a no-op once loaded):
    the datasheet's renderer; the certificate's chart library only if it renders the
    certificate here too, which it imports then."""
    _load(DATASHEET_MODULES)


def _load(names: list[str] | tuple[str, ...]) -> None:
    for name in names:
        with suppress(Exception):
            importlib.import_module(name)
