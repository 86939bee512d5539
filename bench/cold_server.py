"""A home's first Prefect server: from start to answering, on an empty file or the template
(issue 37 goal 2; :mod:`ehr_release.flows.prefect_database`).

Alternates, ``--rounds`` times, a server started on no database (Prefect migrates a new
SQLite file and registers its block types, as every cold run did before the template), one
started on a copy of the template that ``ehr-release warm-up`` makes but still running
Prefect's migration check and block registration (the previous stop's product), and one
on a copy told to skip both (the product now: ``SEEDED_SERVER_SETTINGS``), each in a fresh
``PREFECT_HOME`` with the environment the CLI gives its server
(:func:`ehr_release.flows.server.server_env`). Prints
the seconds until ``/api/health`` answers and the server's CPU seconds (``/proc``), side by
side, with the machine's load.

    .venv/bin/python bench/cold_server.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from process_cpu import cpu_seconds

from ehr_release.flows.prefect_database import (
    SEEDED_SERVER_SETTINGS,
    build_template,
    seed_from_template,
)
from ehr_release.flows.server import _free_port, server_command, server_env


@contextmanager
def home_server(prefect_home: Path, seeded: bool, skip: bool,
                extra_env: dict[str, str] | None = None
                ) -> Iterator[tuple[subprocess.Popen[bytes], float]]:
    """A server started in ``prefect_home`` as the CLI starts a home's server (on a copy of
    the template if ``seeded``, skipping its migration and registration if ``skip``, with
    ``extra_env`` on top): the process and the seconds until it answered. Ended on exit."""
    port = _free_port()
    env = server_env(port) | {"PREFECT_HOME": str(prefect_home)}
    if seeded and not seed_from_template(env):
        raise SystemExit("no template: run `ehr-release warm-up` first")
    if skip:
        env |= SEEDED_SERVER_SETTINGS
    env |= extra_env or {}
    started = time.monotonic()
    proc = subprocess.Popen(
        server_command(port), env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code \
                        == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise SystemExit("the server exited before answering")
            time.sleep(0.1)
        yield proc, time.monotonic() - started
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def start_once(prefect_home: Path, seeded: bool, skip: bool) -> tuple[float, float]:
    """Seconds until the server answers, and its CPU seconds by then."""
    with home_server(prefect_home, seeded, skip) as (proc, answered_s):
        cpu = cpu_seconds(proc.pid, children=True)  # its own and its reaped children's
        if cpu is None:
            raise SystemExit("the server ended as it answered")
        return answered_s, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    build_template()
    cases = {"empty file (migrates)": (False, False), "template, steps rerun": (True, False),
             "template, steps skipped": (True, True)}
    rows: dict[str, list[tuple[float, float]]] = {label: [] for label in cases}
    with tempfile.TemporaryDirectory() as scratch:
        for i in range(args.rounds):
            for n, (label, (seeded, skip)) in enumerate(cases.items()):
                home = Path(scratch) / f"{i}-{n}"
                home.mkdir()
                rows[label].append(start_once(home, seeded, skip))
    print(f"first Prefect server of a home, {args.rounds} rounds alternated "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'database':<24}{'answers after s (each)':<30}{'median':>8}{'cpu s median':>14}")
    for label, found in rows.items():
        walls = [w for w, _ in found]
        print(f"{label:<24}{' '.join(f'{w:.1f}' for w in walls):<30}"
              f"{statistics.median(walls):>8.1f}{statistics.median(c for _, c in found):>14.1f}")


if __name__ == "__main__":
    main()
