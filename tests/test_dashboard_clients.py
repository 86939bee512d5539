"""Issue 33 item 5: the per-client sign-in limit cannot be dodged with X-Forwarded-For, and
every 429 says when to come back.

Before, ``ehr-release dashboard`` ran uvicorn with its default proxy headers, which trust
``X-Forwarded-For`` from 127.0.0.1: any local process got a fresh client — a fresh
allowance of guesses — per forged value, and a 429 carried no ``Retry-After``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.requests import Request

from ehr_release.core.errors import ConfigError
from ehr_release.dashboard.app import create_app
from ehr_release.dashboard.security import client_address, trusted_proxies_from_env
from tests.flow_helpers import free_port

LIMITS = {"EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_USER": "50",
          "EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_CLIENT": "3",
          "EHR_RELEASE_SIGNIN_WINDOW_S": "600",
          "EHR_RELEASE_SIGNIN_LOCKOUT_S": "600"}


def _request(peer: str, *forwarded: str) -> Request:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    return Request({"type": "http", "method": "POST", "path": "/login", "headers": headers,
                    "client": (peer, 40000), "query_string": b""})


def _proxies(monkeypatch, value: str):
    monkeypatch.setenv("EHR_RELEASE_TRUSTED_PROXIES", value)
    return trusted_proxies_from_env()


def test_without_trusted_proxies_the_socket_is_the_client(monkeypatch) -> None:
    monkeypatch.delenv("EHR_RELEASE_TRUSTED_PROXIES", raising=False)
    assert client_address(_request("127.0.0.1", "203.0.113.9"), trusted_proxies_from_env()) \
        == "127.0.0.1"


def test_a_trusted_proxy_names_the_right_most_untrusted_address(monkeypatch) -> None:
    proxies = _proxies(monkeypatch, "10.0.0.1, 10.1.0.0/16")
    # what the client wrote (forged) is left of what the proxies appended
    assert client_address(_request("10.0.0.1", "1.2.3.4, 198.51.100.7"), proxies) == \
        "198.51.100.7"
    assert client_address(_request("10.0.0.1", "1.2.3.4, 198.51.100.7, 10.1.2.3"), proxies) \
        == "198.51.100.7"
    assert client_address(_request("10.0.0.1", "1.2.3.4", "198.51.100.7"), proxies) == \
        "198.51.100.7"  # several header lines are one list, in order
    assert client_address(_request("10.0.0.1"), proxies) == "10.0.0.1"
    # a peer that is not a trusted proxy: its header is ignored
    assert client_address(_request("192.0.2.5", "198.51.100.7"), proxies) == "192.0.2.5"


def test_a_bad_trusted_proxies_setting_is_one_line(monkeypatch) -> None:
    from typer.testing import CliRunner

    from ehr_release import cli

    with pytest.raises(ConfigError, match="EHR_RELEASE_TRUSTED_PROXIES"):
        _proxies(monkeypatch, "10.0.0.1, proxy.example")
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: None)
    result = CliRunner().invoke(cli.app, ["dashboard"])
    assert result.exit_code == 1 and "EHR_RELEASE_TRUSTED_PROXIES" in result.output
    assert "Traceback" not in result.output


def _guess(client: TestClient | httpx.Client, name: str, forwarded: str | None = None):
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return client.post("/login", data={"name": name, "credential": "guess"}, headers=headers)


def test_every_429_says_when_the_lock_ends(ehr_home, monkeypatch) -> None:
    for key, value in LIMITS.items():
        monkeypatch.setenv(key, value)
    client = TestClient(create_app(), follow_redirects=False)
    for i in range(3):
        assert _guess(client, f"name{i}").status_code == 200
    locked = _guess(client, "name9")
    assert locked.status_code == 429
    assert 590 <= int(locked.headers["Retry-After"]) <= 600


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_limit(ehr_home,
                                                                         monkeypatch) -> None:
    for key, value in LIMITS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("EHR_RELEASE_TRUSTED_PROXIES", "10.0.0.1")
    proxy = TestClient(create_app(), follow_redirects=False, client=("10.0.0.1", 5000))
    for i in range(3):
        assert _guess(proxy, f"name{i}", "9.9.9.9, 198.51.100.7").status_code == 200
    # the forged left-hand entry changes nothing: the proxy's own entry is the client
    assert _guess(proxy, "name5", "1.1.1.1, 198.51.100.7").status_code == 429
    assert _guess(proxy, "name6", "198.51.100.8").status_code == 200


@pytest.fixture
def served(tmp_path: Path):
    """``ehr-release dashboard`` as a site runs it: its own process, uvicorn, a fresh home."""
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("EHR_RELEASE_DATABASE", "EHR_RELEASE_TRUSTED", "FORWARDED"))}
    env.update(EHR_RELEASE_HOME=str(tmp_path / "home"), **LIMITS)
    proc = subprocess.Popen([sys.executable, "-m", "ehr_release.cli", "dashboard", "--port",
                             str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            httpx.get(base + "/login", timeout=2)
            break
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(proc.stderr.read().decode() if proc.stderr else "") \
                    from None
            time.sleep(0.3)
    try:
        with httpx.Client(base_url=base, follow_redirects=False, timeout=30) as client:
            yield client
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_local_process_cannot_forge_new_clients(served: httpx.Client) -> None:
    """Each attempt claims another X-Forwarded-For address from 127.0.0.1; the limit of the
    one real client (the socket) still locks it, and the 429 says Retry-After."""
    for i in range(3):
        assert _guess(served, f"name{i}", f"203.0.113.{i}").status_code == 200
    locked = _guess(served, "name7", "203.0.113.77")
    assert locked.status_code == 429, "a forged X-Forwarded-For was a new client"
    assert 1 <= int(locked.headers["Retry-After"]) <= 600


def test_only_a_trusted_proxy_makes_cookies_secure_by_forwarded_proto(monkeypatch) -> None:
    from ehr_release.dashboard.security import cookie_is_secure

    proxies = _proxies(monkeypatch, "10.0.0.1")

    def via(peer: str) -> Request:
        return Request({"type": "http", "method": "POST", "path": "/login",
                        "headers": [(b"x-forwarded-proto", b"https")],
                        "client": (peer, 40000), "query_string": b""})

    assert cookie_is_secure(via("10.0.0.1"), False, proxies)
    assert not cookie_is_secure(via("127.0.0.1"), False, proxies)
    assert not cookie_is_secure(via("10.0.0.1"), False, ())
