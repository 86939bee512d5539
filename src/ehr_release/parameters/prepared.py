"""The inputs a release's parameters name, loaded once and carried with the parameters.

A configuration, a population or a code hierarchy is read once per release
(:attr:`ehr_release.registry.AlgorithmEntry.prepare`); the plan hands the result to every
stage under :data:`PREPARED`. This module sits below the registry, the verifiers and the
evaluations, so each of them can take an input from there without importing the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: Key under which a release's stages find the inputs its parameters name, loaded once
#: (carried by :class:`ehr_release.planning.plan.ReleasePlan`).
PREPARED = "_prepared"


def prepared(params: Mapping[str, Any], name: str, load: Callable[[], Any]) -> Any:
    """The input ``name`` as the release's plan loaded it, else ``load()`` (a call made
    outside a release flow — a test, ``ehr-release verify`` — reads its file itself)."""
    ready = params.get(PREPARED) or {}
    return ready[name] if name in ready else load()
