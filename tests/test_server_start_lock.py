"""One local Prefect server per home, however many processes ask at once (issue 33 part 4).

Two first runs in a fresh home each started a ``prefect server start``; both migrated
Prefect's database at once and runs stalled. Here real processes ask together, each
from the thread a flow process asks from (``ensure_api_soon``); the server they start is a
stand-in (an HTTP server answering ``/api/health`` whose command line reads like
Prefect's), so the test takes seconds, not a real server's twenty.
``test_local_server.py`` starts the real one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# A stand-in for `prefect server start`: slow to come up, then healthy. Its argv holds
# "prefect server start" so the home's checks (_is_our_server) take it for one.
_FAKE_SERVER = textwrap.dedent("""
    import http.server, sys, time
    time.sleep(2)  # a real server migrates its database first
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/api/health" else 404)
            self.end_headers()
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[-1])), H).serve_forever()
""")

_CALLER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import ehr_release.flows.server as server
    server.server_command = lambda port: [sys.executable, sys.argv[1], "prefect", "server",
                                           "start", str(port)]
    from prefect.settings import PREFECT_API_URL  # imported before the start signal
    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.01)
    print(server.ensure_api_soon().result())
""")


def test_processes_starting_together_share_one_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fake = tmp_path / "fake_server.py"
    fake.write_text(_FAKE_SERVER)
    go = tmp_path / "go"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(EHR_RELEASE_HOME=str(home), PREFECT_HOME=str(tmp_path / "prefect"),
               PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    callers = [subprocess.Popen([sys.executable, "-c", _CALLER, str(fake), str(go)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(3)]
    try:
        time.sleep(4)  # all import Prefect's settings, then ask together
        go.touch()
        outputs = [c.communicate(timeout=120) for c in callers]
        assert [c.returncode for c in callers] == [0, 0, 0], [e for _, e in outputs]
        urls = {out.strip() for out, _ in outputs}
        assert len(urls) == 1  # before the lock: three servers, three addresses
        servers = _fake_servers(fake)
        assert len(servers) == 1
        state = json.loads((home / "prefect-server.json").read_text())
        assert state["url"] in urls and state["pid"] in servers
    finally:
        for pid in _fake_servers(fake):
            os.killpg(pid, signal.SIGTERM)


def _fake_servers(script: Path) -> list[int]:
    """Process ids of the stand-in servers running ``script``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(script).encode() in args:
            found.append(int(proc.name))
    return found
