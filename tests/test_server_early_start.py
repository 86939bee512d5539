"""The local Prefect server of a cold home starts first thing in the flow process (issue 37
goal 2): beside Prefect's import and the CLI's precheck, never twice, and stopped again when
Prefect's own settings name another API. The server is a stand-in, as in
``test_server_start_lock.py`` (an HTTP server whose command line reads like Prefect's), so
this takes seconds; ``test_local_server.py`` starts the real one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Healthy after a second (a real server imports Prefect and migrates first); with an
# argument "silent" it never answers.
_FAKE_SERVER = textwrap.dedent("""
    import http.server, sys, time
    if "silent" in sys.argv:
        time.sleep(600)
    time.sleep(1)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/api/health" else 404)
            self.end_headers()
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[-1])), H).serve_forever()
""")


def in_home(code: str, tmp_path: Path, *extra: str) -> dict:
    """Run ``code`` in a fresh process of a fresh home whose server is the stand-in."""
    fake = tmp_path / "fake_server.py"
    fake.write_text(_FAKE_SERVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(EHR_RELEASE_HOME=str(tmp_path / "home"),
               PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    script = textwrap.dedent(f"""
        import json, os, sys
        import ehr_release.flows.server as server
        server._server_command = lambda port: [sys.executable, {str(fake)!r}, "prefect",
                                               "server", "start", *{list(extra)!r}, str(port)]
        server.configure_prefect_home()
        first, again = server.start_early(), server.start_early()
        loaded = "prefect" in sys.modules
        recorded = json.loads(server._state_file().read_text())
    """) + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def servers(tmp_path: Path) -> list[int]:
    """Process ids of the stand-in servers of this test."""
    script = str(tmp_path / "fake_server.py").encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and script in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def stop_all(tmp_path: Path) -> None:
    for pid in servers(tmp_path):
        os.killpg(pid, signal.SIGTERM)


def test_a_cold_home_starts_its_server_before_prefect_is_loaded_and_only_once(tmp_path):
    try:
        shown = in_home("""
            url = server.ensure_api(started_early=first)
            print(json.dumps({"first": first, "again": again, "loaded": loaded,
                              "recorded": recorded, "url": url}))
        """, tmp_path)
        assert (shown["first"], shown["again"], shown["loaded"]) == (True, False, False)
        assert shown["url"] == shown["recorded"]["url"]
        assert servers(tmp_path) == [shown["recorded"]["pid"]]
    finally:
        stop_all(tmp_path)


def test_a_server_started_early_is_stopped_when_prefect_names_another_api(tmp_path):
    other = "http://127.0.0.1:9/api"  # what a profile or prefect.toml would name
    try:
        shown = in_home(f"""
            os.environ["PREFECT_API_URL"] = {other!r}
            print(json.dumps({{"first": first,
                               "url": server.ensure_api(started_early=first)}}))
        """, tmp_path)
        assert shown == {"first": True, "url": other}
        assert servers(tmp_path) == []
    finally:
        stop_all(tmp_path)


def test_a_server_slow_to_answer_is_never_doubled(tmp_path):
    """Seen at load 16: the first start outlived the wait, and the next caller started a
    second server beside it. Now the wait ends in an error and the first is left to come
    up."""
    try:
        shown = in_home("""
            server.STARTUP_TIMEOUT_S = 2
            try:
                server.ensure_api(started_early=first)
                error = None
            except RuntimeError as exc:
                error = str(exc)
            print(json.dumps({"first": first, "error": error, "recorded": recorded}))
        """, tmp_path, "silent")
        assert shown["first"] is True
        assert shown["error"] == "the local Prefect server did not start within 2 s"
        assert servers(tmp_path) == [shown["recorded"]["pid"]]
    finally:
        stop_all(tmp_path)
