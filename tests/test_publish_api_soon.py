"""An approval in a cold home starts the local Prefect server while the publishing flow
loads, not after (issue 37 goal 3): ``approve`` after ``server stop`` spent 5.0-5.5 s in
"start the publishing flow", Prefect's import and the server's start one after the other;
4.2-4.7 s with the search begun first (``ehr_release.flows.server.ensure_api_soon``)."""

from __future__ import annotations

from concurrent.futures import Future
from contextlib import contextmanager
from types import SimpleNamespace

from ehr_release import service
from ehr_release.flows import server
from ehr_release.storage.runs import Status

LOCAL = "http://127.0.0.1:9/api"


def _answered(url: str) -> Future[str]:
    found: Future[str] = Future()
    found.set_result(url)
    return found


def test_the_early_search_gives_the_api_when_nothing_names_one(monkeypatch) -> None:
    monkeypatch.setattr(server, "configured_api", lambda: None)
    with service.prefect_api(_answered(LOCAL)) as url:
        assert url == LOCAL


def test_a_configured_api_wins_and_the_search_is_not_waited_for(monkeypatch) -> None:
    monkeypatch.setattr(server, "configured_api", lambda: "http://prefect.example/api")
    never: Future[str] = Future()  # a search that never answers
    with service.prefect_api(never) as url:
        assert url == "http://prefect.example/api"


def test_publish_begins_the_search_before_the_flow_and_runs_the_flow_on_it(monkeypatch
                                                                          ) -> None:
    from ehr_release.flows import publish as publish_module
    from ehr_release.tasks import render_aside

    calls: list[object] = []
    search = _answered(LOCAL)

    def soon(start_if=None):
        calls.append("search")
        return search

    @contextmanager
    def api(found=None):
        calls.append(("api", found))
        yield LOCAL

    monkeypatch.setattr(server, "ensure_api_soon", soon)
    monkeypatch.setattr(service, "prefect_api", api)
    monkeypatch.setattr(publish_module, "publish_flow", lambda run_id: calls.append("flow"))
    monkeypatch.setattr(render_aside, "start_renderer", lambda: None)
    monkeypatch.setattr(render_aside, "stop_renderer", lambda: None)
    monkeypatch.setattr(service.runs, "get_run",
                        lambda run_id: SimpleNamespace(status=Status.APPROVED))
    assert service.publish("rel-0") == Status.APPROVED
    assert calls == ["search", ("api", search), "flow"]


def test_settings_loaded_in_this_process_are_taken_and_start_no_server(harness, ehr_home
                                                                       ) -> None:
    """Under Prefect's test harness (a temporary settings context: no variable or file
    names its API) the search once started this home's local server beside it: 38 servers
    were left running by one run of the suite."""
    from prefect.settings import PREFECT_API_URL

    assert server.ensure_api_soon().result(timeout=60) == str(PREFECT_API_URL.value())
    assert not (ehr_home / "prefect-server.json").exists()
    assert server.running_server() is None
