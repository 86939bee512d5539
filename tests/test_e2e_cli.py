"""End to end through the real command line: separate processes, one local Prefect server.

This is what a data steward and a reviewer do: `run` in one process (the flow keeps running
detached and pauses at the gate), `approve` from another, then `audit verify`. Slow (it
starts a Prefect server, ~20 s) but it is the only test of the cross-process gate.
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

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "ehr_release.cli"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("e2e")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "EHR_RELEASE_DATABASE"))}
    env.update(EHR_RELEASE_HOME=str(root / "home"), EHR_RELEASE_TEST_MODE="1")
    data = write_sample(generate_sample(300, seed=11), root / "patients.csv")

    def cli(*args: str, check: bool = False, timeout: int = 600) -> subprocess.CompletedProcess:
        done = subprocess.run([*CLI, *args], env=env, cwd=root, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{args} exited {done.returncode}: {done.stderr}")
        return done

    yield root, data, cli
    cli("server", "stop")


def _start(cli, data: Path, out: Path) -> str:
    done = cli("run", "--input", str(data), "--class-column", CLASS_COLUMN,
               "--algorithm", "disassociation", "--param", "k=5", "--param", "m=2",
               "--requester", "steward.sam", "--out", str(out), check=True)
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def published(world) -> tuple[str, Path]:
    """One request approved and published through the real CLI, read by the tests below
    (each such release costs a run, a server start and an approval: about 15 s)."""
    root, data, cli = world
    out = root / "out"
    run_id = _start(cli, data, out)
    status = json.loads(cli("status", run_id, "--json", check=True).stdout)
    assert status["status"] == "awaiting_approval"
    assert not (out / "releases" / run_id).exists()

    refused = cli("approve", run_id, "--reviewer", "steward.sam", "--decision", "approve",
                  "--reason", "mine")
    assert refused.returncode == 1 and "requested this run" in refused.stderr

    # Issue 15 item 4: a pending review holds no process and survives the Prefect server
    # being stopped (the demo tells users to stop it); the decision publishes on its own.
    assert _processes_end(run_id, within_s=30)
    assert cli("server", "stop", check=True).stdout.strip() == "stopped"
    approved = cli("approve", run_id, "--reviewer", "privacy.officer", "--decision", "approve",
                   "--reason", "verified independently", check=True)
    assert approved.stdout.strip() == f"{run_id}: published"
    return run_id, out / "releases" / run_id


def test_request_approve_publish_then_tamper(world, published) -> None:
    root, data, cli = world
    run_id, folder = published
    assert {p.name for p in folder.iterdir()} >= {"release.parquet", "datasheet.pdf",
                                                  "manifest.json"}
    assert json.loads(cli("status", run_id, "--json").stdout)["status"] == "published"

    reverify = cli("verify", "--algorithm", "disassociation", "--release",
                   str(folder / "release.parquet"), "--original", str(data),
                   "--param", "k=5", "--param", "m=2")
    assert reverify.returncode == 0, reverify.stderr
    assert json.loads(reverify.stdout)["holds"] is True

    assert cli("audit", "verify").returncode == 0
    release = folder / "release.parquet"
    release.write_bytes(release.read_bytes() + b" ")
    tampered = cli("audit", "verify")
    assert tampered.returncode == 1
    assert "release.parquet" in tampered.stdout + tampered.stderr


def _processes_end(text: str, *, within_s: float) -> bool:
    """Whether every process naming ``text`` ends within ``within_s`` seconds.

    The flow process exits by itself once it has parked the run, usually within 1.5 s of
    the CLI's return, but on a loaded machine its teardown (Prefect's final state, the
    second process) can outlast the two CLI calls a test makes first. A process *waiting*
    for the decision would stay for the approval timeout (minutes), so this still tells.
    """
    deadline = time.monotonic() + within_s
    while _processes_mentioning(text):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line names ``text`` (the flow launcher names the run)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(int(proc.name))
    return found


def test_approve_exits_nonzero_when_the_run_is_not_published(world) -> None:
    root, data, cli = world
    out = root / "out-broken"
    run_id = _start(cli, data, out)
    import shutil

    shutil.rmtree(root / "home" / "runs" / run_id / "candidate")  # the bundle is damaged
    done = cli("approve", run_id, "--reviewer", "privacy.officer", "--decision", "approve",
               "--reason", "looks fine")
    # the approval re-judges the release with its history and cannot read it back: refused
    # before anything is recorded (audited); the run waits for `resume` to rebuild it
    assert done.returncode == 1 and "parked release is missing or changed" in done.stderr
    assert json.loads(cli("status", run_id, "--json").stdout)["status"] == "awaiting_approval"
    events = cli("audit", "export", "--run", run_id, "--format", "jsonl").stdout
    assert '"action":"approval.refused"' in events and '"action":"run.approved"' not in events
    assert not (out / "releases" / run_id).exists()


def test_reject_publishes_nothing(world) -> None:
    root, data, cli = world
    out = root / "out-reject"
    run_id = _start(cli, data, out)
    cli("approve", run_id, "--reviewer", "privacy.officer", "--decision", "reject",
        "--reason", "utility too low for the study", check=True)
    assert json.loads(cli("status", run_id, "--json").stdout)["status"] == "rejected"
    assert not (out / "releases" / run_id).exists()
    events = [json.loads(line) for line in
              cli("audit", "export", "--run", run_id, "--format", "jsonl").stdout.splitlines()]
    actions = [e["action"] for e in events]
    assert "run.rejected" in actions and "run.published" not in actions


def test_nothing_in_the_home_is_readable_by_others(world, published) -> None:
    """Issue 33 item 8: after a request and its approval through the real CLI (a local
    Prefect server, the detached flow process, the publishing flow in the deciding one),
    no file or folder in the home — Prefect's database, results and server log included —
    grants group or others any access. Before, Prefect's files were 0644/0755, and so were
    ``runs/`` and the server log."""
    root, _, _ = world
    run_id, _ = published
    home = root / "home"
    # Prefect's own files are there to be checked (its home is inside ours)
    assert (home / "prefect" / "prefect.db").is_file() and (home / "prefect-server.log").is_file()
    assert (home / "runs" / run_id).is_dir()
    loose = [f"{p.lstat().st_mode & 0o777:o} {p.relative_to(root)}"
             for p in [home, *home.rglob("*")] if not p.is_symlink() and p.lstat().st_mode & 0o077]
    assert loose == []
