"""What the flow process does while it waits for ``go``: read the input, load the stages.

The CLI starts the flow process (:mod:`ehr_release.flows.launch`) before it has finished
checking the request, and writes the request file before it starts it. Once Prefect is
loaded and its API found, the process would only wait while the CLI reads the input in full
(seconds for 58,302 records); on a machine with a second CPU that wait can do work the flow
needs anyway, so it does not wait for it after ``go`` (issue 18 goal 1):

* it reads and checks the input itself (:func:`ehr_release.plan.make_plan`, as the ingest
  stage does), while the CLI reads it too. The result is only *offered* to the ingest
  stage, which takes it when the request it is told to run after ``go`` is the very
  request this plan was made from, and otherwise reads the input again. The plan comes
  from this process's own read and checks, so the stage still trusts no caller; a file
  changed between this read and the CLI's fails the run, as a change between the two
  reads always did (the fingerprints differ);
* it imports the modules the stages load on first use — the algorithm's verifier, attack
  and evaluation, Prefect's engines and, unless the evaluation runs aside, matplotlib and
  WeasyPrint;
* on a machine with a second CPU it spawns the process that evaluates the candidate while
  the flow verifies it, and renders the certificate while the flow renders the datasheet
  (:mod:`ehr_release.tasks.aside`); that process imports what it needs meanwhile. The
  flow's own certificate modules (matplotlib, WeasyPrint: 0.7 CPU s) then load later,
  while it waits for that evaluation (:func:`load_certificate_modules`), not here, where
  the flow process is what the run waits for once the CLI has read the input.

Nothing here writes anything or talks to the database; a failure of any of it (a bad file,
a missing request) is left for the flow to meet and report as before, so it is silenced.
A request refused by the CLI ends the process without running anything, as before.
"""

from __future__ import annotations

import importlib
from contextlib import suppress
from pathlib import Path

from ehr_release.request import ReleaseRequest

#: Modules every release loads in its stages, not at the flow's import: the Prefect engines
#: the first flow and task call load.
STAGE_MODULES = ("prefect.flow_engine", "prefect.task_engine")
#: The certificate's renderer and chart library (charts are drawn with the Agg backend
#: everywhere).
CERTIFICATE_MODULES = ("matplotlib", "matplotlib.pyplot", "weasyprint",
                       "ehr_release.tasks.certify")


def head_start(request_path: Path) -> None:
    """Read and check the input of the request at ``request_path`` and offer the plan to
    the ingest stage; load the modules the stages need. Never raises (see module doc)."""
    request = None
    with suppress(Exception):
        request = ReleaseRequest.model_validate_json(request_path.read_text())
    aside = False
    if request is not None:
        from ehr_release.plan import make_plan
        from ehr_release.tasks.ingest import offer_plan

        with suppress(Exception):
            aside = evaluate_aside(request)
        with suppress(Exception):
            offer_plan(make_plan(request))
    load_stage_modules(request, certificate=not aside)


def evaluate_aside(request: ReleaseRequest) -> bool:
    """Spawn the second process (:mod:`ehr_release.tasks.aside`) for ``request`` when its
    flow runs its tasks on threads (a Dask runner spreads the stages over its workers)."""
    from ehr_release.tasks.aside import start_worker

    if request.task_runner.partition(":")[0] != "threads":
        return False
    return start_worker(request.algorithm)


def load_stage_modules(request: ReleaseRequest | None, *, certificate: bool = True) -> None:
    """Import what the stages of ``request``'s algorithm import on first use (the
    certificate's modules too, unless ``certificate`` is false)."""
    names = list(STAGE_MODULES) + (list(CERTIFICATE_MODULES) if certificate else [])
    if request is not None:
        from ehr_release.registry import get as get_algorithm

        with suppress(Exception):
            names += get_algorithm(request.algorithm).stage_modules()
    _load(names)


def load_certificate_modules() -> None:
    """Import the certificate's modules (a no-op once they are loaded)."""
    _load(CERTIFICATE_MODULES)


def _load(names: list[str] | tuple[str, ...]) -> None:
    for name in names:
        with suppress(Exception):
            module = importlib.import_module(name)
            if name == "matplotlib":
                module.use("Agg")  # as every chart does before it imports pyplot
