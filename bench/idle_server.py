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
import statistics
import tempfile
import time
from pathlib import Path

from cold_server import home_server
from process_cpu import cpu_seconds

from ehr_release.flows.prefect_database import build_template
from ehr_release.flows.server import UNUSED_SERVICES


def idle_cpu_per_minute(prefect_home: Path, defaults: bool, settle_s: float,
                        window_s: float) -> float:
    """The server's CPU seconds per minute over ``window_s`` of idleness."""
    restored = {name: "true" for name in UNUSED_SERVICES} if defaults else None
    with home_server(prefect_home, seeded=True, skip=True, extra_env=restored) as (proc, _):
        time.sleep(settle_s)
        before = cpu_seconds(proc.pid, children=True)
        time.sleep(window_s)
        after = cpu_seconds(proc.pid, children=True)
        if before is None or after is None:
            raise SystemExit("the server ended while idle")
        return (after - before) * 60 / window_s


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
