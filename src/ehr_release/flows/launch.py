"""Entry point of the background process that runs one release flow.

``python -m ehr_release.flows.launch REQUEST.json`` — the CLI starts this process detached (a
long anonymization survives the CLI being closed) *before* it has finished checking the
request: while the CLI reads the input in full and registers the run, this process imports
Prefect and the flow's modules and finds the Prefect API (starting this home's local server
if none answers), which together take seconds. Then it writes ``ready`` to stdout, so the
CLI can show how long it still waited for Prefect, and gets a head start on the flow's work
while the CLI may still be reading (:mod:`ehr_release.flows.head_start`: its own read of
the input, offered to the ingest stage, and the stages' imports; nothing written) — in a
cold home before ``ready``, while the server it started is still starting. Only then does it
read one line from stdin: ``go`` once the CLI has checked the request,
anything else (end of file: the CLI refused the request or died) and it exits without
running anything. The request it runs is REQUEST.json as read after ``go``; the file may
appear only while this process loads (the CLI starts it before the checks that need the
database: :mod:`ehr_release.flows.spawn`), and the head start waits for it. The CLI
watches the run's status in the database; the process ends when the run is parked for its
reviewer. First of all, before it loads Prefect, it spawns its second process
(:mod:`ehr_release.tasks.aside`), which reads the input for the head start meanwhile and
later evaluates and renders beside the flow.

Resolving the API here, not in the CLI, spares the CLI Prefect's import: the API URL may
come from the environment, a profile, ``.env`` or ``prefect.toml``, and only Prefect's own
settings resolve that faithfully.
"""

from __future__ import annotations

import os
import select
import sys
from contextlib import suppress
from pathlib import Path

from ehr_release.core.errors import cap, stored_message

#: The longest explanation sent to the CLI's terminal (within one pipe buffer: never blocks).
TERMINAL_MAX = 4000
#: The line the CLI writes to this process's stdin once the request may run.
GO = "go"
#: The line this process writes to the CLI once Prefect is loaded and its API found.
READY = "ready"


def main(argv: list[str]) -> int:
    from ehr_release.storage.run_folder import wait_for_request
    from ehr_release.tasks.aside import start_worker

    request_path = Path(argv[1])

    def request_written() -> bool:
        """Wait for the request (the CLI writes it once its checks pass); False if the CLI
        refused it or died. A resumed run's is there already."""
        return wait_for_request(request_path, given_up=_cli_spoke)

    # First of all: the second process reads the input while this one loads Prefect.
    start_worker(request_path)
    from ehr_release.flows.server import configure_prefect_home, ensure_api_soon

    configure_prefect_home()
    # A cold home's server starts while Prefect and the flow load, once there is a request
    # (the CLI writes it when its checks pass): a refused request leaves no server behind.
    api = ensure_api_soon(start_if=request_written)
    from ehr_release.flows.head_start import head_start
    from ehr_release.flows.release import release_flow  # noqa: F401 - loaded before ready
    from ehr_release.flows.server import configured_api
    from ehr_release.tasks.aside import stop_worker

    def head_start_once_written() -> bool:
        """The head start, once the request is written; False, with nothing done, if the
        CLI refused it. Never raises: whatever fails there, the flow meets again."""
        if not request_written():
            return False
        head_start(request_path)
        return True

    api_url = configured_api()
    # A cold home's server is still starting: the head start's work (the plan, the stages'
    # imports) is done while it does, not after it answers. A warm home's API is found at
    # once, and the CLI hears ``ready`` first, as it always did.
    started = api_url is None and not api.done() and head_start_once_written()
    try:
        api_url = api_url or api.result()
    except RuntimeError as exc:  # read back to the steward's terminal by the CLI
        print(f"no Prefect API: {exc}", file=sys.stderr)
        stop_worker()
        return 1
    # Tell the CLI. The pipe stays this process's channel to the CLI's terminal (a failure's
    # explanation, which no log or store may hold: :func:`tell_terminal`); stdout becomes
    # the log too.
    print(READY, flush=True)
    terminal = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if not started:
        head_start_once_written()
    try:
        return _run(argv, api_url, terminal)
    finally:
        stop_worker()  # the second process, if the head start spawned one
        with suppress(OSError):
            os.close(terminal)  # the CLI reads to this end


def _cli_spoke() -> bool:
    """Whether the CLI wrote to this process's stdin or closed it: ``go`` comes only after
    the request is written, the end of it when the CLI refused the request or died."""
    return bool(select.select([sys.stdin.fileno()], [], [], 0)[0])


def tell_terminal(terminal: int, exc: BaseException) -> None:
    """Send the steward's terminal what the stored message of ``exc`` leaves out.

    Our errors keep their explanation — a failed verification's measurements, the codes a
    configuration misses — out of every store and of Prefect (:mod:`ehr_release.tasks.
    redaction` keeps it in this process only): it may quote the data. The CLI that started
    this run, if it still waits, prints it; nothing else reads the pipe. A bug's message
    could quote anything and is never sent. Never blocks: a CLI that has gone (or stopped
    reading) just does not get it.
    """
    from ehr_release.tasks.redaction import terminal_text

    text = terminal_text(exc)
    if text is None:
        return
    with suppress(OSError):  # BrokenPipeError, BlockingIOError: the CLI is not listening
        os.set_blocking(terminal, False)
        os.write(terminal, cap(text, TERMINAL_MAX).encode() + b"\n")


def _run(argv: list[str], api_url: str, terminal: int) -> int:
    """Wait for ``go`` and run the request's flow (see the module doc)."""
    from ehr_release.flows.release import release_flow
    from ehr_release.flows.run_settings import flow_run_settings
    from ehr_release.flows.runners import make_task_runner
    from ehr_release.planning.request import ReleaseRequest

    if sys.stdin.readline().strip() != GO:
        return 0  # the request was refused after this process started: nothing to run
    request = ReleaseRequest.model_validate_json(Path(argv[1]).read_text())
    os.environ["PREFECT_API_URL"] = api_url  # for processes the flow starts (Dask workers)
    flow = release_flow.with_options(task_runner=make_task_runner(request.task_runner))
    try:
        with flow_run_settings(api_url):
            flow(request)
    except Exception as exc:  # the flow already recorded the failure and the audit event
        # The log is read back to the steward's terminal and kept on disk: no values in it.
        print(f"release {request.run_id} failed: {stored_message(exc)}", file=sys.stderr)
        tell_terminal(terminal, exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
