"""Entry point of the background process that runs one release flow.

``python -m ehr_release.flows.launch REQUEST.json`` — the CLI writes the request, starts this
process detached (a long anonymization survives the CLI being closed) and watches the run's
status in the database. The process ends when the run is parked for its reviewer.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ehr_release.errors import stored_message


def main(argv: list[str]) -> int:
    from ehr_release.flows.server import configure_prefect_home

    configure_prefect_home()
    from ehr_release.flows.release import release_flow
    from ehr_release.flows.runners import make_task_runner
    from ehr_release.request import ReleaseRequest

    request = ReleaseRequest.model_validate_json(Path(argv[1]).read_text())
    flow = release_flow.with_options(task_runner=make_task_runner(request.task_runner))
    try:
        flow(request)
    except Exception as exc:  # the flow already recorded the failure and the audit event
        # The log is read back to the steward's terminal and kept on disk: no values in it.
        print(f"release {request.run_id} failed: {stored_message(exc)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
