"""What a home's Prefect server costs while nobody uses it: CPU seconds a minute.

A steward's home keeps its server running between releases (until ``server stop``), so its
idle cost is paid for as long as it runs. Alternates, ``--rounds`` times, a server started as
the CLI starts it (:func:`ehr_release.flows.server.server_env`: only the services a home
uses, :data:`~ehr_release.flows.server.UNUSED_SERVICES`) and one with Prefect's default
services, each on a fresh copy of the template in its own ``PREFECT_HOME``. Each is left
``--settle`` seconds after it answers, then its CPU time (``/proc``) is read over
``--window`` seconds with nothing calling it.

    .venv/bin/python bench/idle_server.py [--rounds 2] [--window 60]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
from process_cpu import cpu_seconds

from ehr_release.flows.prefect_database import (
    SEEDED_SERVER_SETTINGS,
    build_template,
    seed_from_template,
)
from ehr_release.flows.server import UNUSED_SERVICES, server_command, server_env


def idle_cpu_per_minute(prefect_home: Path, defaults: bool, settle_s: float,
                        window_s: float) -> float:
    """The server's CPU seconds per minute over ``window_s`` of idleness."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = server_env(port) | {"PREFECT_HOME": str(prefect_home)}
    if defaults:
        env |= {name: "true" for name in UNUSED_SERVICES}
    if not seed_from_template(env):
        raise SystemExit("no template: run `ehr-release warm-up` first")
    env |= SEEDED_SERVER_SETTINGS
    proc = subprocess.Popen(server_command(port), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code \
                        == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise SystemExit("the server exited before answering")
            time.sleep(0.2)
        time.sleep(settle_s)
        before = cpu_seconds(proc.pid, children=True)
        time.sleep(window_s)
        after = cpu_seconds(proc.pid, children=True)
        if before is None or after is None:
            raise SystemExit("the server ended while idle")
        return (after - before) * 60 / window_s
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=15.0)
    parser.add_argument("--window", type=float, default=60.0)
    args = parser.parse_args()
    build_template()
    cases = {"as the CLI starts it": False, "Prefect's default services": True}
    rows: dict[str, list[float]] = {label: [] for label in cases}
    with tempfile.TemporaryDirectory() as scratch:
        for i in range(args.rounds):
            for label, defaults in cases.items():
                home = Path(scratch) / f"{i}-{int(defaults)}"
                home.mkdir()
                rows[label].append(idle_cpu_per_minute(home, defaults, args.settle,
                                                       args.window))
    print(f"an idle home Prefect server, {args.rounds} rounds alternated, {args.window:.0f} s "
          f"windows (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'services':<30}{'CPU s a minute (each)':<30}{'median':>8}")
    for label, found in rows.items():
        print(f"{label:<30}{' '.join(f'{c:.2f}' for c in found):<30}"
              f"{statistics.median(found):>8.2f}")


if __name__ == "__main__":
    main()
