"""A run's work folder in the home, and the request file its flow process runs.

The CLI starts a run's flow process on the run id alone, before the checks that need the
database (:mod:`ehr_release.flows.spawn`), so the request may appear only while the process
and its second process load: :func:`hand_request` writes it all at once and
:func:`wait_for_request` waits for it. Nothing here imports the database layer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ehr_release.core.files import check_safe_name, fsync_dir, write_durably
from ehr_release.storage.home import home, private_dir

if TYPE_CHECKING:
    from ehr_release.planning.request import ReleaseRequest

#: The request's file in the run's folder: what the flow process runs once told ``go``.
REQUEST_FILE = "request.json"
#: Where the request is written before it is renamed into place (never read).
REQUEST_PART = REQUEST_FILE + ".part"
#: The flow process's log (its stderr) in the run's folder.
LOG_FILE = "flow.log"
#: How often a process waiting for its request looks for the file.
REQUEST_POLL_S = 0.01


def run_folder(run_id: str) -> Path:
    """The run's work folder in the home (request, flow log, drafts)."""
    return home() / "runs" / check_safe_name(run_id)


def request_path(run_id: str) -> Path:
    return run_folder(run_id) / REQUEST_FILE


def hand_request(request: ReleaseRequest) -> Path:
    """Write ``request`` where its flow process reads it, all at once: written and synced
    under another name, then renamed into place, so a reader never sees part of it."""
    path = private_dir(run_folder(request.run_id)) / REQUEST_FILE
    part = path.with_name(REQUEST_PART)
    write_durably(part, request.model_dump_json().encode(), private=True)
    os.replace(part, path)
    fsync_dir(path.parent)
    return path


def wait_for_request(path: Path, *, given_up: Callable[[], bool]) -> bool:
    """Wait until the request file at ``path`` exists (:func:`hand_request`); True then,
    False as soon as ``given_up()`` says its writer will not write it (the CLI refused the
    request or died, the parent process ended)."""
    while not path.exists():
        if given_up():
            return False
        time.sleep(REQUEST_POLL_S)
    return True
