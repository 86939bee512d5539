"""Other algorithms' releases of one extract, made once per comparison and shared.

Why: ArtUC's evaluation compares a release with RmR's and Baseline's releases of the same
extract at the same parameters (the paper's §5). In a comparison, the ArtUC, RmR and Baseline
candidates at one grid point need each other's releases: without sharing, each candidate
re-runs the other two anonymizers for its own evaluation (issue 18 measured it). A
:class:`ComparatorReleases` lives for one comparison and one dataset; a release is keyed by
the algorithm and the parameters that algorithm reads (its declared parameters, defaults
filled in), so it is computed at most once — by the candidate itself or by the first
evaluation that asks, whichever comes first; the other waits — and everyone gets the same
bytes: the same release a fresh run with the same seed gives. Releases with per-patient
pseudonyms (``id_file``) differ per candidate and are never shared.

It holds release bytes (anonymized data, never the original) in memory only, for as long as
the comparison runs. Pickled (a process-based task runner), it arrives empty: each process
then computes what it needs, as without sharing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ehr_release.parameters.params import REQUIRED, Param
from ehr_release.parameters.prepared import PREPARED

#: Parameters that change how a release is evaluated, not the release itself.
NOT_OF_THE_RELEASE = frozenset({"compare", PREPARED})
#: Key under which a comparison's stages find its store (in the prepared inputs).
STORE = "comparator_releases"

Releases = dict[str, bytes]


def release_key(name: str, declared: Iterable[Param], params: Mapping[str, Any]) -> str:
    """``name`` and the values of the parameters it declares (defaults where ``params``
    has none), as canonical JSON: two requests for the same release get the same key."""
    values = {}
    for p in declared:
        if p.name in NOT_OF_THE_RELEASE:
            continue
        value = params.get(p.name, p.default)
        values[p.name] = None if value is REQUIRED else value
    return json.dumps([name, values], sort_keys=True, default=str)


class ComparatorReleases:
    """Releases of one dataset by key (:func:`release_key`), each computed once."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self._done: dict[str, Releases | Exception] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self.computed = 0  # how many releases this store made (tests, benchmarks)

    def __getstate__(self) -> dict[str, Any]:
        return {"dataset": self.dataset}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["dataset"])  # type: ignore[misc]

    def get(self, key: str, dataset: Any, compute: Callable[[], Releases]) -> Releases:
        """The release under ``key``, computing it once; another dataset than the store's
        is never served from it. Two threads asking for one key wait for one computation.
        A computation that fails (δ or ε cannot be met) fails the same way for every caller,
        without running again."""
        if dataset is not self.dataset:
            return compute()
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                done = self._done.get(key)
            if done is None:
                try:
                    done = compute()
                except Exception as exc:  # noqa: BLE001 - kept and re-raised to each caller
                    done = exc
                with self._lock:
                    self.computed += 1
                    self._done[key] = done
        if isinstance(done, Exception):
            raise done
        return done


def store_of(params: Mapping[str, Any]) -> ComparatorReleases | None:
    """The comparison's store the parameters carry, if any (a release run has none)."""
    ready = params.get(PREPARED) or {}
    store = ready.get(STORE)
    return store if isinstance(store, ComparatorReleases) else None
