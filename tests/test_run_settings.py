"""The flows we call ourselves run without Prefect's flow-run heartbeats (issue 37).

Prefect 3.8 joins its heartbeat thread as a sync flow ends, and that thread sleeps in whole
seconds: each flow run returned up to a second late (an ``approve`` 4.9–5.2 s → 4.3–4.5 s
without it). Each test runs a flow and reads, from inside it, the settings Prefect's engine
took its heartbeat period from.
"""

from __future__ import annotations

import io
import sys

import pytest
from prefect import flow
from prefect.settings import (
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    get_current_settings,
    temporary_settings,
)

from ehr_release import service
from ehr_release.flows import launch


@flow(name="settings-probe", persist_result=False)
def settings_probe() -> tuple[int | None, str]:
    settings = get_current_settings()
    return settings.flows.heartbeat_frequency, str(settings.api.url)


@pytest.fixture
def prefect_defaults(harness):
    """Prefect's own heartbeat setting, not the one the harness runs the suite's flows under:
    what the code under test turns off must be on when it starts."""
    with temporary_settings(restore_defaults={PREFECT_FLOWS_HEARTBEAT_FREQUENCY}):
        assert get_current_settings().flows.heartbeat_frequency
        yield


def test_a_flow_of_a_deciding_process_sends_no_heartbeats(prefect_defaults):
    """The publishing and comparison flows run in ``service.prefect_api()``."""
    with service.prefect_api() as api_url:
        heartbeat, url = settings_probe()
    assert heartbeat is None
    assert url == api_url


def test_the_release_flows_process_sends_no_heartbeats(prefect_defaults, flow_csv, tmp_path,
                                                        monkeypatch):
    """The flow process runs the request it is told to go ahead with under the settings."""
    from tests.flow_helpers import request_for

    request = request_for(flow_csv, tmp_path / "out")
    request_file = tmp_path / "request.json"
    request_file.write_text(request.model_dump_json())
    seen = {}

    @flow(name="release-probe", persist_result=False)
    def release_probe(req) -> str:
        seen["heartbeat"], seen["url"] = settings_probe()
        return "awaiting_approval"

    import ehr_release.flows.release as release_module

    monkeypatch.setattr(release_module, "release_flow", release_probe)
    monkeypatch.setattr(sys, "stdin", io.StringIO(launch.GO + "\n"))
    api_url = str(get_current_settings().api.url)
    assert launch._run(["launch", str(request_file)], api_url, terminal=-1) == 0
    assert seen == {"heartbeat": None, "url": api_url}
