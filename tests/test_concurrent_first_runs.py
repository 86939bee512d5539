"""Eight first runs started together in a fresh home, through the real CLI (issue 33 part 4).

Before: on a fresh PostgreSQL database 7 of 8 runs ended in a 100-line traceback (the
tables created twice at once) and left no run and no audit event; on a fresh SQLite home 2
of 3 first runs stalled, because two Prefect servers started and migrated at once. Now the
schema is migrated under a lock (:mod:`ehr_release.storage.migrate`) and the home's server
is started under one (:mod:`ehr_release.flows.server`): every run reaches its reviewer, on
one server. Slow: 8 releases and a Prefect server on one machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ehr_release.samples.sample import CLASS_COLUMN, generate_sample, write_sample
from tests.flow_helpers import server_pids

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "ehr_release.cli"]
RUNS = 8


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_eight_first_runs_at_once_all_reach_the_reviewer(backend, tmp_path, request):
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "EHR_RELEASE_DATABASE"))}
    env.update(EHR_RELEASE_HOME=str(home), EHR_RELEASE_TEST_MODE="1",
               EHR_RELEASE_RELEASES_ROOT=str(tmp_path),
               PYTHONPATH=f"{Path(__file__).resolve().parents[1] / 'src'}"
                          f"{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    if backend == "postgresql":
        env["EHR_RELEASE_DATABASE_URL"] = request.getfixturevalue("pg_url")
    data = write_sample(generate_sample(300, seed=11), tmp_path / "patients.csv")

    def cli(*args: str, **kw) -> subprocess.Popen:
        return subprocess.Popen([*CLI, *args], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **kw)

    try:
        runs = [cli("run", "--input", str(data), "--class-column", CLASS_COLUMN,
                    "--algorithm", "disassociation", "--param", "k=5", "--param", "m=2",
                    "--requester", "steward.sam", "--out", str(tmp_path / f"out{i}"))
                for i in range(RUNS)]
        results = [(p.communicate(timeout=1800), p.returncode) for p in runs]
        failed = [(rc, err.strip().splitlines()[-3:]) for (_, err), rc in results if rc != 0]
        assert failed == []
        run_ids = [out.strip().splitlines()[-1] for (out, _), _ in results]
        assert len(set(run_ids)) == RUNS
        # Every run parked for its reviewer, and no other run: one listing, not a command
        # per run (each command is a process that imports the CLI).
        listing = cli("list")
        rows = listing.communicate(timeout=300)[0].strip().splitlines()[1:]
        assert listing.returncode == 0
        assert {row.split()[0]: row.split()[1] for row in rows} == \
            dict.fromkeys(run_ids, "awaiting_approval")
        audit = cli("audit", "verify")
        assert audit.communicate(timeout=300) and audit.returncode == 0
        state = json.loads((home / "prefect-server.json").read_text())
        assert server_pids(home) == [state["pid"]]  # one server, the recorded one
    finally:
        stop = cli("server", "stop")
        stop.communicate(timeout=120)
        deadline = time.monotonic() + 30
        while server_pids(home) and time.monotonic() < deadline:
            time.sleep(0.5)


