"""The release flow's process is started before the CLI has finished checking the request
(issue 18 goal 1): it loads Prefect meanwhile, says ``ready``, and runs only when told
``go`` — a request refused after it started must run nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ehr_release.flows.launch import GO, READY


def _launch(tmp_path: Path) -> subprocess.Popen[bytes]:
    # An explicit API URL: ensure_api takes it as given, so no server is needed or started.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(EHR_RELEASE_HOME=str(tmp_path / "home"), EHR_RELEASE_TEST_MODE="1",
               PREFECT_API_URL="http://127.0.0.1:9/api")
    return subprocess.Popen(
        [sys.executable, "-m", "ehr_release.flows.launch", str(tmp_path / "request.json")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_a_called_off_flow_process_runs_nothing(tmp_path: Path) -> None:
    proc = _launch(tmp_path)
    out, err = proc.communicate(b"", timeout=600)  # end of stdin: the CLI refused or died
    assert proc.returncode == 0, err.decode()[-2000:]
    assert out.decode().splitlines() == [READY]
    assert not (tmp_path / "request.json").exists()  # it never looked for a request
    assert not (tmp_path / "home" / "prefect-server.json").exists()


def test_only_go_lets_the_flow_process_read_its_request(tmp_path: Path) -> None:
    proc = _launch(tmp_path)
    _, err = proc.communicate(GO.encode() + b"\n", timeout=600)
    # Told to go, it reads the request file; there is none here, so it fails on that.
    assert proc.returncode != 0 and "request.json" in err.decode(), err.decode()[-2000:]


def test_a_called_off_flow_process_with_a_request_writes_nothing(tmp_path: Path) -> None:
    """The head start reads the request's input while it waits; refused, nothing is left."""
    from ehr_release.planning.request import ReleaseRequest

    data = tmp_path / "patients.csv"
    data.write_text("patient_id,age,gender,codes\n"
                    + "".join(f"S{i:03d},{30 + i},F,401.9 250.00\n" for i in range(12)))
    request = ReleaseRequest(run_id="rel-0123456789abcdef0123456789abcdef",
                             input_path=str(data), algorithm="disassociation",
                             params={"k": "3", "m": "2"}, requester="steward",
                             out_dir=str(tmp_path / "out"), approval_timeout_s=300)
    (tmp_path / "request.json").write_text(request.model_dump_json())
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    proc = _launch(tmp_path)
    out, err = proc.communicate(b"", timeout=600)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert out.decode().splitlines() == [READY]
    # Only Prefect's own folder appears (as when no request is there): no run, no database.
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == sorted([*before, Path("home"), Path("home", "prefect")])


#: Runs ``launch.main`` with its API search, second process, head start and flow replaced:
#: the API is found at once ("warm"), or ("cold") once the head start has run or as soon as
#: it is waited for, whichever comes first (no clock: the machine's load cannot decide the
#: order). The head start prints to the process's stdout, which stays the CLI's pipe until
#: ``ready``.
HEAD_START_ORDER = """
import sys
from concurrent.futures import Future
from ehr_release.flows import head_start, launch, server
from ehr_release.tasks import aside

URL = "http://127.0.0.1:9/api"


class Search(Future):
    def result(self, timeout=None):
        if not self.done():  # waited for before the head start: the server answers now
            self.set_result(URL)
        return super().result(timeout)


api = Search()
if sys.argv[2] == "warm":
    api.set_result(URL)
server.ensure_api_soon = lambda start_if=None: api
server.configured_api = lambda: None
aside.start_worker = lambda path: False

def fake_head_start(path):
    print("head start", flush=True)
    if not api.done():
        api.set_result(URL)

head_start.head_start = fake_head_start
launch._run = lambda argv, url, terminal: 0
sys.exit(launch.main([sys.argv[0], sys.argv[1]]))
"""


def _order(tmp_path: Path, home: str) -> tuple[list[str], str]:
    request = tmp_path / "request.json"
    request.write_text("{}")  # written by the CLI: the head start may begin
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(EHR_RELEASE_HOME=str(tmp_path / "home"), EHR_RELEASE_TEST_MODE="1")
    done = subprocess.run([sys.executable, "-c", HEAD_START_ORDER, str(request), home],
                          stdin=subprocess.PIPE, capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines(), done.stderr


def test_a_cold_homes_head_start_runs_while_its_server_starts(tmp_path: Path) -> None:
    """Cold: the plan and the stages' imports are done while the server starts, before the
    ``ready`` that waits for it, not after it answers; once only."""
    stdout, stderr = _order(tmp_path, "cold")
    assert stdout == ["head start", READY]
    assert "head start" not in stderr


def test_a_warm_homes_flow_process_says_ready_first(tmp_path: Path) -> None:
    stdout, stderr = _order(tmp_path, "warm")
    assert stdout == [READY]
    assert stderr.splitlines().count("head start") == 1
