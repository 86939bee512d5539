"""A home's Prefect server runs the services Prefect runs for its own single-user server.

An idle home server polled SQLite from seven loop services a home never uses (schedules,
late runs, workers, pauses, leases, cleanup messages, cancelled runs' children): 1.56 CPU s a
minute against 1.13 without them (``bench/idle_server.py``). Prefect marks the services its
ephemeral server needs (``RunInEphemeralServers``, ``run_in_ephemeral``); the home's server
turns off exactly the others, read here from Prefect's own registry, so a Prefect upgrade
that adds a loop service, or makes one ephemeral, fails this test instead of passing
unnoticed.
"""

from __future__ import annotations

from typing import Any

import pytest

from ehr_release.flows.server import UNUSED_SERVICES, server_env


def _services() -> dict[str, tuple[bool, Any]]:
    """Every server service Prefect knows: whether its ephemeral server runs it, and whether
    the current settings enable it (``"always"`` for the streams, which have no setting)."""
    from prefect.server.services.base import RunInEphemeralServers, Service
    from prefect.server.services.perpetual_services import _PERPETUAL_SERVICES

    found: dict[str, tuple[bool, Any]] = {
        config.function.__name__: (config.run_in_ephemeral, config.enabled_getter())
        for config in _PERPETUAL_SERVICES}
    for service in Service.all_services():
        try:
            enabled: Any = service.service_settings().enabled
        except NotImplementedError:
            enabled = "always"
        found[service.__name__] = (issubclass(service, RunInEphemeralServers), enabled)
    return found


def _under(settings: dict[str, str]) -> dict[str, tuple[bool, Any]]:
    import prefect.settings
    from prefect.settings import temporary_settings

    with temporary_settings(updates={getattr(prefect.settings, name): value
                                     for name, value in settings.items()}):
        return _services()


def test_the_home_server_runs_what_prefects_own_local_server_runs() -> None:
    default = _services()
    ours = _under(UNUSED_SERVICES)
    assert len(default) >= 10, default  # the registry was read, not an empty import
    for name, (ephemeral, enabled) in default.items():
        if ephemeral:
            assert ours[name][1] == enabled, f"{name} is used by a home and was changed"
        else:
            assert ours[name][1] is False, f"{name} still runs on a home's server"
    turned_off = [name for name, (_, enabled) in default.items()
                  if enabled is True and ours[name][1] is False]
    assert len(turned_off) >= 7, turned_off


def test_the_services_the_home_uses_stay() -> None:
    ours = _under(UNUSED_SERVICES)
    for name in ("TaskRunRecorder", "EventPersister", "ReactiveTriggers", "Actions"):
        assert ours[name] == (True, True), name


@pytest.mark.parametrize("name", sorted(UNUSED_SERVICES))
def test_a_service_asked_for_in_the_environment_runs(name: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A steward who needs one of them (say, a schedule on the home's server) sets it."""
    monkeypatch.setenv(name, "true")
    env = server_env(4200)
    assert env[name] == "true"
    assert all(env[other] == "false" for other in UNUSED_SERVICES if other != name)
