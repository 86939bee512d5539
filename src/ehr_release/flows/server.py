"""One local Prefect server that every ehr-release process shares.

Pausing a flow in one process and resuming it from another needs an API both can reach.
Two ephemeral servers on one SQLite file lock each other out, so the CLI starts a single
``prefect server start`` on loopback the first time it is needed and reuses it afterwards
(its address is kept in ``.ehr_release/prefect-server.json``). An explicit
``PREFECT_API_URL`` (a real server, or the test harness) always wins.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from ehr_release.storage.engine import home

STARTUP_TIMEOUT_S = 90


def configure_prefect_home() -> None:
    """Keep Prefect's local state (results, settings) under our working folder.

    Must run before :mod:`prefect` is imported, which is why the CLI imports flows lazily.
    """
    os.environ.setdefault("PREFECT_HOME", str(home() / "prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def _state_file() -> Path:
    return home() / "prefect-server.json"


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_api() -> str:
    """The Prefect API URL to use, starting the shared local server if none is running."""
    from prefect.settings import PREFECT_API_URL

    configured = PREFECT_API_URL.value()
    if configured:
        return str(configured)
    state = _state_file()
    if state.exists():
        url = json.loads(state.read_text())["url"]
        if _healthy(url):
            return url
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    log = (home() / "prefect-server.log").open("ab")
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        start_new_session=True)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the local Prefect server exited; see {home()}/prefect-server.log")
        if _healthy(url):
            state.write_text(json.dumps({"url": url, "pid": proc.pid}))
            return url
        time.sleep(0.5)
    proc.terminate()
    raise RuntimeError(f"the local Prefect server did not start within {STARTUP_TIMEOUT_S} s")


def stop_local_server() -> bool:
    """Stop the shared server if this folder started one; True if one was stopped."""
    state = _state_file()
    if not state.exists():
        return False
    pid = json.loads(state.read_text())["pid"]
    state.unlink()
    try:
        os.killpg(pid, 15)
    except ProcessLookupError:
        return False
    return True
