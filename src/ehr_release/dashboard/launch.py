"""Starting a release flow from the dashboard, as ``ehr-release run`` starts one.

Why a module: the page that requests a release must not wait for the flow (minutes), and
tests must be able to run the flow in process instead. The request has been checked and its
run registered (:func:`ehr_release.service.precheck`) before the launcher is called; the
launcher only starts the flow: :func:`ehr_release.service.start_release` in a daemon thread,
which starts the detached flow process (it outlives the dashboard) and follows the run until
it is parked for a reviewer. Verification, the attack audit and the approval gate are the
flow's own, as for any release.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ehr_release.planning.request import ReleaseRequest

#: Starts the release flow of a checked, registered request without waiting for it.
Launcher = Callable[[ReleaseRequest], None]
#: How long the thread follows the run (the flow goes on without it).
FOLLOW_S = 24 * 3600
_LOG = logging.getLogger("ehr_release.dashboard")


def launch_in_background(request: ReleaseRequest) -> None:
    """The default launcher (see the module docstring)."""
    from ehr_release import service

    def follow() -> None:
        try:
            service.start_release(request, wait_timeout_s=FOLLOW_S)
        except Exception as exc:  # noqa: BLE001 — the run's own status tells the story
            _LOG.error("dashboard: the release flow of %s stopped with %s", request.run_id,
                       type(exc).__name__)

    threading.Thread(target=follow, name=f"release-{request.run_id}", daemon=True).start()
