"""Two ε requests at the same moment, each with the account's read slowed: were check and
reservation two steps, both would read before either wrote (tests of storage/budget.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from ehr_release.storage import budget


def race(monkeypatch: pytest.MonkeyPatch, requests: list[Callable[[], object]]) -> list[str]:
    """Start ``requests`` together; each outcome is "reserved" or "refused", sorted."""
    account = budget._account

    def slow_account(*args, **kwargs):
        spent = account(*args, **kwargs)
        time.sleep(0.3)
        return spent

    monkeypatch.setattr(budget, "_account", slow_account)
    start = threading.Barrier(len(requests))
    outcomes: list[str] = []

    def attempt(request: Callable[[], object]) -> None:
        start.wait()
        try:
            request()
            outcomes.append("reserved")
        except budget.EpsilonBudgetExhausted:
            outcomes.append("refused")

    threads = [threading.Thread(target=attempt, args=(r,)) for r in requests]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    monkeypatch.setattr(budget, "_account", account)
    return sorted(outcomes)
