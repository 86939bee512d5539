"""``run`` starts the flow process on the run id alone, before its database layer loads
(issue 37 goal 1), and hands it the request once the checks that need the database pass.

Every refusal in between — who asks, where to, the site's data-use policy, self-approval —
must call the process off: it is gone when the command returns, it started no Prefect
server, and the run's folder is gone with it. The process and its second process wait for
a request written after they started.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ehr_release.cli import app
from ehr_release.flows import spawn
from ehr_release.planning.request import REQUIRE_DATA_USE_ENV, ReleaseRequest
from ehr_release.storage import runs
from ehr_release.storage.run_folder import (
    REQUEST_PART,
    hand_request,
    request_path,
    wait_for_request,
)
from ehr_release.storage.users import add_user


@pytest.fixture
def spawned(ehr_home, monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """The flow processes the command starts (real ones, recorded)."""
    started: list[subprocess.Popen[bytes]] = []
    real = spawn.spawn_flow

    def recording(run_id: str) -> subprocess.Popen[bytes]:
        proc = real(run_id)
        started.append(proc)
        return proc

    monkeypatch.setattr(spawn, "spawn_flow", recording)
    for name in ("PREFECT_API_URL", "PREFECT_PROFILE"):  # the home's own server, if any
        monkeypatch.delenv(name, raising=False)
    return started


def _run(tmp_path: Path, *extra: str, requester: str = "sam", env: dict | None = None):
    data = tmp_path / "x.csv"
    data.write_text("patient_id,codes\nA,401.9\nB,401.9\n")
    return CliRunner().invoke(app, ["run", "--input", str(data), "--algorithm",
                                    "disassociation", "--param", "k=2", "--requester",
                                    requester, *extra], env=env)


def _set_up(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The command refused for ``case`` after its flow process started, and the message."""
    if case == "identity":
        add_user("rita", "reviewer")
        return (_run(tmp_path, requester="nobody", env={"EHR_RELEASE_CREDENTIAL": "guess"}),
                "unknown user or wrong credential")
    if case == "destination":
        return _run(tmp_path, "--out", "/"), "outside the releases root"
    if case == "data-use":
        monkeypatch.setenv(REQUIRE_DATA_USE_ENV, "1")
        return _run(tmp_path), "missing: --recipient"
    assert case == "self-approval"
    return (_run(tmp_path, "--approve-as", "Sam", "--reason", "fine"),
            "requested this release and may not approve it")


@pytest.mark.parametrize("case", ["identity", "destination", "data-use", "self-approval"])
def test_a_refusal_after_the_flow_process_started_calls_it_off(
        case: str, spawned, ehr_home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    done, message = _set_up(case, tmp_path, monkeypatch)
    assert done.exit_code == 1 and message in done.output, done.output
    (proc,) = spawned  # it was started before the refusal...
    assert proc.poll() is not None  # ...and is gone when the command returns
    assert runs.list_runs() == []
    runs_folder = ehr_home / "runs"
    assert not runs_folder.exists() or list(runs_folder.iterdir()) == []
    assert not (ehr_home / "prefect-server.json").exists()  # no server started for it


def test_the_request_appears_whole_and_is_waited_for(ehr_home: Path) -> None:
    request = ReleaseRequest(run_id="rel-" + "7" * 32, input_path="x.csv",
                             algorithm="disassociation", params={"k": "2"},
                             requester="sam", out_dir="/tmp/out")
    path = request_path(request.run_id)
    writer = threading.Timer(0.3, hand_request, args=(request,))
    started = time.monotonic()
    writer.start()
    assert wait_for_request(path, given_up=lambda: False)
    assert time.monotonic() - started >= 0.25
    writer.join()
    assert ReleaseRequest.model_validate_json(path.read_text()) == request
    assert not path.with_name(REQUEST_PART).exists()
    assert path.stat().st_mode & 0o777 == 0o600


def test_waiting_stops_when_the_writer_is_gone(tmp_path: Path) -> None:
    asked = []
    assert not wait_for_request(tmp_path / "request.json",
                                given_up=lambda: asked.append(1) or len(asked) > 2)
    assert len(asked) == 3


def test_the_second_process_reads_a_request_written_after_it_started(
        ehr_home: Path, tmp_path: Path) -> None:
    from ehr_release.tasks import aside

    data = tmp_path / "patients.csv"
    data.write_text("patient_id,age,gender,codes\n"
                    + "".join(f"S{i:03d},{30 + i},F,401.9 250.00\n" for i in range(12)))
    request = ReleaseRequest(run_id="rel-" + "8" * 32, input_path=str(data),
                             algorithm="disassociation", params={"k": "3", "m": "2"},
                             requester="sam", out_dir=str(tmp_path / "out"))
    writer = threading.Timer(0.3, hand_request, args=(request,))
    writer.start()
    (status, result), algorithm = aside._read_input(str(request_path(request.run_id)))
    writer.join()
    assert status == "ok" and algorithm == "disassociation"
    read, dataset, _ = result
    assert read == request and dataset.n_patients == 12


def test_no_server_is_started_for_a_process_with_nothing_to_run(ehr_home: Path) -> None:
    from ehr_release.flows.server import local_api

    with pytest.raises(RuntimeError, match="nothing to run"):
        local_api(start_if=lambda: False)
    assert not (ehr_home / "prefect-server.json").exists()


#: How long the flow process below is left to load (it asks for its API about 1 s in).
LOADING_S = 4.0


def test_a_flow_process_whose_request_never_comes_starts_no_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started on a run id in a cold home (no server, nothing naming an API), the process
    loads, but starts the home's server only for a request: refused, it leaves none."""
    from ehr_release.flows.server import stop_local_server

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(EHR_RELEASE_HOME=str(home), EHR_RELEASE_TEST_MODE="1",
               PREFECT_HOME=str(tmp_path / "prefect"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "ehr_release.flows.launch", str(tmp_path / "request.json")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        cwd=tmp_path)
    try:
        deadline = time.monotonic() + LOADING_S
        while time.monotonic() < deadline and not (home / "prefect-server.json").exists():
            time.sleep(0.1)
        out, err = proc.communicate(b"", timeout=120)  # the CLI refused: end of stdin
        assert not (home / "prefect-server.json").exists(), err.decode()[-2000:]
        assert proc.returncode == 1 and b"nothing to run" in err and out == b""
    finally:
        monkeypatch.setenv("EHR_RELEASE_HOME", str(home))
        stop_local_server()  # only if one was started after all
