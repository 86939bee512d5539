"""Shared pieces of the flow tests: a small extract, requests, a flow in a thread."""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import json
import os
import socket
import threading
import time
from pathlib import Path

from ehr_release.storage import runs
from ehr_release.storage.runs import TERMINAL, Status

CSV = ("patient_id,age,gender,codes\n"
       + "".join(f"S{i:03d},{30 + i},{'FM'[i % 2]},401.9 250.00{' 272.0' if i % 3 else ''}"
                 f"{' 296.01' if i == 7 else ''}\n" for i in range(12)))


def request_for(data: Path, out: Path, algorithm="code-counts", timeout=300, **extra):
    from ehr_release.planning.request import ReleaseRequest

    return ReleaseRequest(run_id=runs.new_run_id(), input_path=str(data), algorithm=algorithm,
                          params={"k": "3"}, requester="steward", out_dir=str(out),
                          approval_timeout_s=timeout, **extra)


def start(request):
    """Run ``release_flow`` in a thread; ``box["result"]`` becomes the run's final status.

    The flow itself ends at ``awaiting_approval`` (no process waits for a reviewer); the
    thread then only watches the database until a decision — recorded by :func:`decide`,
    which runs the publishing flow — settles the run, so tests read one outcome.
    """
    from ehr_release.flows.release import release_flow

    box: dict = {}

    def target():
        try:
            box["flow"] = release_flow(request)
            box["result"] = box["flow"]
            if box["flow"] not in TERMINAL:
                box["result"] = str(wait_outcome(request.run_id, timeout=300))
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            box["error"] = exc

    # The flow runs under the test's Prefect settings (a thread starts with none of them).
    thread = threading.Thread(target=contextvars.copy_context().run, args=(target,),
                              daemon=True)
    thread.start()
    return thread, box


def wait_status(run_id, wanted, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = runs.get_run(run_id).status
            if status in wanted:
                return status
        except Exception:  # noqa: BLE001 - not created yet
            pass
        time.sleep(0.3)
    raise AssertionError(f"run never reached {wanted}")


def wait_outcome(run_id, timeout=300):
    """The run's end: a terminal status, or ``approved`` once a publishing attempt failed
    (the run then waits for a retry, which no test thread would see)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = runs.get_run(run_id)
        if run.status in TERMINAL or runs.publication_failed(run):
            return run.status
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} never ended")


def decide(run_id, decision):
    """Record a decision as a reviewer would; an approval publishes in this thread."""
    from ehr_release.service import decide as record_and_publish

    return record_and_publish(run_id, reviewer="reviewer", decision=decision,
                              reason="checked")


def run_approved(request, timeout=120) -> dict:
    """Start the flow, approve once it awaits a decision, wait for it; the outcome box."""
    thread, box = start(request)
    assert wait_status(request.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}) == \
        Status.AWAITING_APPROVAL
    decide(request.run_id, "approve")
    thread.join(timeout)
    return box


def _readable(path: Path) -> bytes:
    """A file's bytes, and what Prefect base64-encodes in it (pickled results, exceptions)."""
    blob = path.read_bytes()
    parts = [blob]
    try:
        parts.append(base64.b64decode(json.loads(blob)["result"]))
    except (ValueError, KeyError, TypeError, binascii.Error):
        with contextlib.suppress(ValueError, binascii.Error):
            parts.append(base64.b64decode(blob, validate=False))
    return b"\n".join(parts)


def copies_of(marker: str, places: list[Path]) -> list[str]:
    """Every file under ``places`` holding ``marker``, as written or base64-encoded."""
    return [str(p) for folder in places if folder.exists() for p in folder.rglob("*")
            if p.is_file() and marker.encode() in _readable(p)]


def server_pids(home: Path) -> list[int]:
    """Live ``prefect server start`` processes started for ``home``."""
    return [pid for pid, its_home in _servers() if its_home == str(home)]


def servers_under(folder: Path) -> dict[int, str]:
    """Live ``prefect server start`` processes started for a home under ``folder``, with
    that home."""
    return {pid: its_home for pid, its_home in _servers()
            if its_home.startswith(f"{folder}{os.sep}")}


def _servers() -> list[tuple[int, str]]:
    """Live ``prefect server start`` processes and the home each was started for (its
    ``EHR_RELEASE_HOME``, empty if none)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"prefect" in args and b"server" in args and b"start" in args:
            homes = [v[len(b"EHR_RELEASE_HOME="):] for v in environ
                     if v.startswith(b"EHR_RELEASE_HOME=")]
            found.append((int(proc.name), homes[0].decode(errors="replace") if homes else ""))
    return found


def free_port() -> int:
    """A TCP port free on the loopback now (the dashboard tests' servers bind it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
