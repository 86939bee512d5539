"""Cache keys for stages that may be resumed after a crash.

A key combines the release id, the dataset fingerprint, the algorithm, its parameters and
the content of every file they name (:meth:`ehr_release.planning.plan.ReleasePlan.cache_material`),
and a hash of the task's own source. Keying on the release id means a retry or resume of the same
release reuses its result — important for anything that spends privacy budget, which must
never be spent twice — while a new release recomputes.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from typing import Any

from ehr_release.core.canonical import canonical_json
from ehr_release.storage.home import private_dir


def stage_cache(run_id: str) -> Path:
    """The result storage of a run's cached stages: a private folder of the run
    (:func:`ehr_release.release.bundle.stage_cache_dir`), so discarding the run discards the cache.
    A path, which Prefect reads as a local file system (an unsaved block it refuses)."""
    from ehr_release.release.bundle import stage_cache_dir

    folder = stage_cache_dir(run_id)
    return private_dir(folder)


def release_stage_key(context: Any, parameters: dict[str, Any]) -> str:
    task_fn = context.task.fn
    source = hashlib.sha256(inspect.getsource(task_fn).encode()).hexdigest()[:16]
    material = canonical_json({
        "task": context.task.name,
        "source": source,
        **parameters["plan"].cache_material(),
    })
    return hashlib.sha256(material.encode()).hexdigest()
