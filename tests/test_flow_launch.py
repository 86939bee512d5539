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
