"""The map-function contract by which pure code lets the flow spread its work out.

A stage that has independent items (utility reconstructions, partitions of the verifier's
counting) takes an optional ``map_fn(fn, items)`` that must return ``[fn(x) for x in items]``
in order. The registry hands in one that submits the items to the flow's task runner; tests
and plain calls get :func:`serial_map`. The pure code never imports Prefect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MapFn = Callable[[Callable[[Any], Any], list[Any]], list[Any]]


def serial_map(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``fn`` over ``items`` here, in order."""
    return [fn(x) for x in items]
