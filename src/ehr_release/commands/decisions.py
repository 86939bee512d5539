"""A reviewer's decision (`approve`) and finishing a publication that stopped (`publish`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from ehr_release.commands.common import fail, full_run_id, identity
from ehr_release.core.errors import EhrReleaseError


def approve(
    run_id: Annotated[str, typer.Argument(help="The run to decide (or a unique start of "
                                               "its id).", callback=full_run_id)],
    reviewer: Annotated[str, typer.Option(help="Reviewer name.")],
    decision: Annotated[str, typer.Option(help="approve or reject.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit trail).")],
) -> None:
    """Record a reviewer's decision; an approval publishes the release right away.

    No process waits for the decision: recording an approval starts the publishing flow
    here. Exits 1 when an approved run does not end published. Once users are registered
    the reviewer's credential is needed (EHR_RELEASE_CREDENTIAL, else a prompt).
    """
    from ehr_release import service
    from ehr_release.cli_support.progress import StepProgress
    from ehr_release.storage import runs
    from ehr_release.storage.actions import Decision
    from ehr_release.storage.runs import Status

    try:
        who = identity(reviewer, "reviewer")
        decided = {"reviewer": who.name, "decision": decision, "reason": reason,
                   "channel": who.channel, "role": who.role}
        with StepProgress(f"{decision} {run_id}") as shown:  # each step on stderr
            status = service.decide(run_id, **decided)  # an approval publishes (Prefect)
            if decision == Decision.APPROVE and status != Status.PUBLISHED:
                shown.failed()
    except (EhrReleaseError, TimeoutError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    typer.echo(f"{run_id}: {status}")
    if decision == Decision.APPROVE and status != Status.PUBLISHED:
        typer.echo(f"error: {runs.get_run(run_id).error or 'not published'}", err=True)
        raise typer.Exit(code=1)



def publish(run_id: Annotated[str, typer.Argument(
        help="An approved run to publish (or a unique start of its id).",
        callback=full_run_id)]) -> None:
    """Finish publishing an approved run whose publishing stopped (crash, reboot) or failed
    (disk full, a broken destination): retried from the same pinned, approved release.

    Each step shows on stderr with its time, as under ``approve``: the retry runs the same
    publishing flow (20 s and more) and was silent until it ended. Exits 1, with the run's
    stored reason, when the run does not end published.
    """
    from ehr_release import service
    from ehr_release.cli_support.progress import StepProgress
    from ehr_release.storage import runs
    from ehr_release.storage.runs import Status

    try:
        with StepProgress(f"publish {run_id}") as shown:  # each step on stderr
            status = service.publish(run_id)
            if status != Status.PUBLISHED:
                shown.failed()
    except (EhrReleaseError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    typer.echo(f"{run_id}: {status}")
    if status != Status.PUBLISHED:
        typer.echo(f"error: {runs.get_run(run_id).error or 'not published'}", err=True)
        raise typer.Exit(code=1)
