"""The local server's health check loads no certificate store for a plain-HTTP address.

A starting server is asked every 0.1 s; each ask that let httpx build a verifying TLS
context loaded its CA bundle (33 ms of CPU) on the CPU the starting server needs. An HTTPS
address must still be verified.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ehr_release.flows import server


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.send_response(200 if self.path == "/api/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_api() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/api"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def ca_loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every load of a certificate store into a TLS context, recorded."""
    loads: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def recorded(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loads.append(args or kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", recorded)
    return loads


def test_a_plain_http_server_is_asked_without_a_certificate_store(
        local_api: str, ca_loads: list[object]) -> None:
    assert server._healthy(local_api) is True
    assert server._healthy(local_api.replace("/api", "/elsewhere")) is False
    assert ca_loads == []


def test_an_https_address_is_still_verified(ca_loads: list[object]) -> None:
    # Nothing listens there: the context is built (and its store loaded) before connecting.
    assert server._healthy("https://127.0.0.1:9/api") is False
    assert ca_loads, "an HTTPS health check must verify the server's certificate"


def test_a_server_just_started_is_waited_for_and_an_ended_one_is_not(monkeypatch) -> None:
    """Right after ``Popen`` returns, the child's command line may still read empty (it once
    failed 5 of 2,182 tests in CI): a start is waited for by its own exit status, never
    taken for a death; a process that has ended is (a zombie's command line reads empty)."""
    import subprocess
    import sys

    monkeypatch.setattr(server, "STARTUP_TIMEOUT_S", 0.2)
    refused = "http://127.0.0.1:9/api"  # nothing answers: only the deadline ends the wait
    for _ in range(20):
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(5)", "prefect", "server", "start"],
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        began = time.monotonic()
        assert server._wait_healthy(refused, child.pid, child) is False
        waited = time.monotonic() - began
        child.kill()
        child.wait()
        assert waited >= 0.2, "a fresh start was taken for a death"
    ended = subprocess.Popen([sys.executable, "-c", "pass", "prefect", "server", "start"])
    while Path(f"/proc/{ended.pid}/stat").read_bytes().split(b") ")[1][:1] != b"Z":
        time.sleep(0.01)  # ended, not yet reaped
    assert server._is_our_server(ended.pid) is False
    assert server._wait_healthy(refused, ended.pid, ended) is False
    assert server._wait_healthy(refused, ended.pid) is False  # as recorded by another
    ended.wait()
    assert server._is_our_server(ended.pid) is False
