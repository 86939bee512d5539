"""Run one release flow and SIGKILL this process at a chosen point (used by test_crashes).

``python -m tests.crash_driver REQUEST.json POINT`` where POINT is ``after:<status>`` (right
after the run's status changed), ``in:anonymize``, ``in:publish`` (after the first staged
file) or ``after-rename`` (release folder renamed into place, not yet recorded). For the last
two the driver records an approval once the run is parked, which publishes in this process. SIGKILL
gives the flow no chance to clean up: that is the point.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

#: Points inside the publishing flow, which the decision starts in this process.
AFTER_APPROVAL = ("in:publish", "after-rename")


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def install(point: str) -> None:
    from ehr_release import registry
    from ehr_release.storage import runs
    from ehr_release.tasks import publish
    from tests import doubles

    table = dict(registry._entries())
    table[doubles.CODE_COUNTS.name] = doubles.CODE_COUNTS
    if point == "in:anonymize":
        import dataclasses

        def dying(*args, **kwargs):  # noqa: ANN002, ANN003 - same signature as anonymize
            _die()

        table["code-counts"] = dataclasses.replace(doubles.CODE_COUNTS, anonymize=dying)
    registry._entries = lambda: table

    if point.startswith("after:"):
        target = point.removeprefix("after:")
        real = runs.transition

        def transition_then_die(run_id, status, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
            result = real(run_id, status, *args, **kwargs)
            if str(getattr(status, "value", status)) == target and kwargs.get("session") is None:
                _die()
            return result

        runs.transition = transition_then_die
    elif point == "in:publish":
        real_write = publish.write_durably
        written: list[Path] = []

        def write_then_die(path: Path, data: bytes, **kwargs) -> None:  # noqa: ANN003
            real_write(path, data, **kwargs)
            written.append(path)
            if len(written) == 1:
                _die()

        publish.write_durably = write_then_die
    elif point == "after-rename":
        real_rename = os.rename

        def rename_then_die(src, dst, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
            real_rename(src, dst, *args, **kwargs)
            if Path(dst).name.startswith("rel-"):
                _die()

        publish.os.rename = rename_then_die


def main(argv: list[str]) -> int:
    from ehr_release.planning.request import ReleaseRequest

    request = ReleaseRequest.model_validate_json(Path(argv[1]).read_text())
    point = argv[2]
    install(point)
    from ehr_release.flows.release import release_flow

    status = release_flow(request)
    if point in AFTER_APPROVAL and status == "awaiting_approval":
        # The decision starts the publishing flow in the process that records it: here.
        from ehr_release.service import decide

        decide(request.run_id, reviewer="reviewer", decision="approve", reason="checked")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
