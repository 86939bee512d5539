"""What the dashboard's routes share, fixed when the app is built (``app.state.settings``).

Read once at start-up, so a bad setting fails then, not on the first request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request

from ehr_release.dashboard.launch import Launcher, launch_in_background
from ehr_release.dashboard.security import Network
from ehr_release.storage.runs import Status
from ehr_release.storage.throttle import ThrottlePolicy

#: Publishes an approved run and returns its final status (tests inject one).
Publisher = Callable[[str], Status]


@dataclass(frozen=True)
class DashboardSettings:
    """``publish`` runs an approved run's publishing flow; ``secure_cookies`` marks cookies
    Secure even when TLS ends at a proxy; ``throttle`` limits failed sign-ins;
    ``trusted_proxies`` are the only peers whose ``X-Forwarded-For`` names the client;
    ``launch`` starts the release flow of a request made on the comparisons page."""

    publish: Publisher
    secure_cookies: bool
    throttle: ThrottlePolicy
    trusted_proxies: tuple[Network, ...] = ()
    launch: Launcher = launch_in_background


def settings_of(request: Request) -> DashboardSettings:
    return request.app.state.settings
