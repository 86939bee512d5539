"""How many CPUs this process may use — in a module of its own, so that asking costs no import.

The flow process asks first thing, before it spawns its second process
(:mod:`ehr_release.tasks.aside`); :mod:`ehr_release.runtime.workers`, which also asks, imports
numpy,
numba and ArtUC's kernels — 1.06–1.10 s measured on this machine (load ≈ 3), which a
disassociation run's flow process otherwise never needs.
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
