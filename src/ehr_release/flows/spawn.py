"""The CLI's side of a release's flow process (:mod:`ehr_release.flows.launch`): start it,
let it go or call it off — without Prefect or the database layer.

Why the CLI starts it early: the flow process's own imports (Prefect and the stages, about
3 s) are the run's critical path, so ``run`` starts it as soon as the command's parameters
and input have passed the checks that need no database (issue 37 goal 1). The service's
import (SQLAlchemy and SQLModel, 0.5 s) and the checks that need it — the requester's
identity, the destination, the site's data-use policy, self-approval — then run while the
process loads, instead of before it starts. The request exists only once they pass, so
the process waits for it (:mod:`ehr_release.storage.run_folder`), and every refusal in
between calls the process off (:func:`call_off`): it has run and written nothing, and the
run's folder goes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import suppress

from ehr_release.storage.home import PRIVATE_UMASK, private_dir
from ehr_release.storage.run_folder import LOG_FILE, REQUEST_FILE, REQUEST_PART, run_folder


def spawn_flow(run_id: str) -> subprocess.Popen[bytes]:
    """Start the flow process of run ``run_id``, detached (it survives this one); it runs
    nothing until :func:`let_run`.

    It imports Prefect and the flow, and finds the Prefect API (starting the local server if
    needed, once the request is written: see :mod:`ehr_release.flows.launch`), while this
    process goes on checking the request. An API URL already set in this process's Prefect
    settings (a test harness, a caller that imported Prefect) is handed down; otherwise
    Prefect is not imported here.
    """
    work = private_dir(run_folder(run_id))
    log_path = work / LOG_FILE
    os.close(os.open(log_path, os.O_CREAT | os.O_WRONLY, 0o600))
    env = dict(os.environ)
    if (api_url := _api_set_here()) is not None:
        env["PREFECT_API_URL"] = api_url
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "ehr_release.flows.launch", str(work / REQUEST_FILE)],
            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.PIPE, env=env,
            start_new_session=True, umask=PRIVATE_UMASK)  # its files in the home: private


def let_run(proc: subprocess.Popen[bytes]) -> None:
    """Let the flow process run its request (written by
    :func:`ehr_release.storage.run_folder.hand_request`).

    A process that died while starting cannot be told; the caller, watching the run's
    status, then reports the last line of its log.
    """
    from ehr_release.flows.launch import GO

    assert proc.stdin is not None
    with suppress(BrokenPipeError, OSError):
        proc.stdin.write(GO.encode() + b"\n")
        proc.stdin.close()


def call_off(proc: subprocess.Popen[bytes], run_id: str) -> None:
    """Send away a flow process whose request was refused: it ends now, and the run's
    folder goes (a refused request leaves no run behind).

    Closing its stdin alone is not enough: the process reads it only once its head start
    is done, and a head start reading a 30M-row file kept it at 10.5 GB after the CLI had
    been killed (issue 33). It has written nothing yet (:mod:`ehr_release.flows.launch`),
    so its process group (it and its second process; not the Prefect server, which has a
    session of its own) is ended at once.
    """
    assert proc.stdin is not None
    with suppress(BrokenPipeError, OSError):
        proc.stdin.close()
    end_process_group(proc)
    work = run_folder(run_id)
    for name in (REQUEST_FILE, REQUEST_PART, LOG_FILE):
        with suppress(FileNotFoundError):
            (work / name).unlink()
    with suppress(OSError):
        work.rmdir()


def end_process_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the process group ``proc`` leads, SIGKILL it if still there after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
            return


def _api_set_here() -> str | None:
    """The Prefect API URL of this process's settings, if Prefect is loaded here already."""
    if "prefect.settings" not in sys.modules:
        return None
    from prefect.settings import PREFECT_API_URL

    return str(PREFECT_API_URL.value()) if PREFECT_API_URL.value() else None
