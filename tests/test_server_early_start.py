"""The local Prefect server of a cold home starts first thing in the flow process (issue 37
goal 2): beside Prefect's import and the CLI's precheck, never twice, and stopped again when
Prefect's own settings name another API. Slow: starts a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.flow_helpers import server_pids

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[1] / "src"


def in_home(code: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(EHR_RELEASE_HOME=str(home),
               PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def stop(home: Path) -> None:
    in_home("from ehr_release.flows.server import stop_local_server as s; "
            "import json; print(json.dumps(s()))", home)


EARLY = (
    "import json, os, sys\n"
    "from ehr_release.flows.server import configure_prefect_home, start_early, _state_file\n"
    "configure_prefect_home()\n"
    "first, again = start_early(), start_early()\n"
    "loaded = 'prefect' in sys.modules\n"
    "recorded = json.loads(_state_file().read_text())\n"
)


def test_a_cold_home_starts_its_server_before_prefect_is_loaded_and_only_once(tmp_path):
    home = tmp_path / "home"
    try:
        shown = in_home(EARLY + (
            "from ehr_release.flows.server import ensure_api\n"
            "url = ensure_api(started_early=first)\n"
            "print(json.dumps({'first': first, 'again': again, 'loaded': loaded,\n"
            "                  'recorded': recorded, 'url': url}))\n"), home)
        assert (shown["first"], shown["again"], shown["loaded"]) == (True, False, False)
        assert shown["url"] == shown["recorded"]["url"]
        assert server_pids(home) == [shown["recorded"]["pid"]]
    finally:
        stop(home)


def test_a_server_started_early_is_stopped_when_prefect_names_another_api(tmp_path):
    home = tmp_path / "home"
    other = "http://127.0.0.1:9/api"  # what a profile or prefect.toml would name
    try:
        shown = in_home(EARLY + (
            f"os.environ['PREFECT_API_URL'] = {other!r}\n"
            "from ehr_release.flows.server import ensure_api\n"
            "print(json.dumps({'first': first, 'url': ensure_api(started_early=first)}))\n"),
            home)
        assert shown == {"first": True, "url": other}
        deadline = time.monotonic() + 15
        while server_pids(home) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server_pids(home) == []
    finally:
        stop(home)
