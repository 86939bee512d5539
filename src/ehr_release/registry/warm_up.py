"""Compile the numba kernels once, ahead of their first use, and tell when a run compiles.

Why: ArtUC's GenDiag loop (:mod:`~ehr_release.algorithms.artuc.gendiag_kernel`) and LDA's
alignment and search kernels (:mod:`~ehr_release.algorithms.lda.kernels`) are compiled by
numba on their first call — 43 s on an idle machine, 174 s on a loaded one, which a
steward's first ArtUC release paid unannounced (issue 34 finding 2). Their machine code is
cached (``cache=True``: beside the sources, or in ``NUMBA_CACHE_DIR``), so compiling once
at install (``make install`` runs ``ehr-release warm-up``) makes every later process load it
instead. The kernels are compiled by calling them as the algorithms do, on small generated
data (no file, no patient): the argument types are exactly those a release asks for, so a
release after the warm-up finds each of its signatures in the cache.

A process that would still compile (an install that skipped the warm-up, a cache folder
that is not writable) is announced by :func:`announce_compile` on the terminal and in
Prefect's log, with the command that avoids it next time.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

#: The command that compiles ahead (printed in every announcement).
COMMAND = "ehr-release warm-up"
#: The modules holding numba kernels, by the algorithm families that call them.
KERNELS = {"artuc": "ehr_release.algorithms.artuc.gendiag_kernel",
           "lda": "ehr_release.algorithms.lda.kernels"}
#: Algorithms (registry names) whose anonymization calls a family's kernels.
FAMILY_OF = {"artuc": "artuc", "artuc-baseline": "artuc", "artuc-unconstrained": "artuc",
             "rmr": "artuc", "lda": "lda", "lda-baseline": "lda"}

def _module(family: str) -> ModuleType:
    import importlib

    return importlib.import_module(KERNELS[family])


def _entry_points(module: ModuleType) -> Iterator[Any]:
    """The module's numba dispatchers that are compiled on their own: those inlined into
    their callers (``inline="always"``) never are, so they have no cache entry."""
    from numba.core.registry import CPUDispatcher

    for value in vars(module).values():
        if (isinstance(value, CPUDispatcher) and value.__module__ == module.__name__
                and value.targetoptions.get("inline") != "always"):
            yield value


def missing_kernels(family: str) -> list[str]:
    """Names of ``family``'s kernels with no cached machine code for their current source
    (empty: a process calling them loads them instead of compiling). Imports numba."""
    missing = []
    for dispatcher in _entry_points(_module(family)):
        cache = dispatcher._cache  # numba's FunctionCache; its index is keyed by the source
        try:
            cached = bool(cache._cache_file._load_index())
        except (AttributeError, OSError, EOFError, ValueError):
            cached = False
        if not cached:
            missing.append(dispatcher.__name__)
    return missing


def announce_compile(algorithm: str, say: Callable[[str], None] | None = None) -> bool:
    """If ``algorithm``'s kernels would be compiled by this process, say so (``say``, else
    stderr); True if it was announced. Cheap for other algorithms: numba is not imported."""
    family = FAMILY_OF.get(algorithm)
    if family is None:
        return False
    missing = missing_kernels(family)
    if not missing:
        return False
    text = (f"{algorithm}: compiling its {len(missing)} numba kernels on first use (about a "
            f"minute, once per install); `{COMMAND}` compiles them ahead")
    (say or (lambda line: print(line, file=sys.stderr, flush=True)))(text)
    return True


def _artuc_calls() -> None:
    """GenDiag's compiled paths as ArtUC calls them: one cluster unweighted (the whole
    loop with its UL), one weighted (set-up, loop and labels apart), one batch of ULs."""
    import numpy as np

    from ehr_release.algorithms.artuc.codes import CodeTable
    from ehr_release.algorithms.artuc.gendiag import ULBatch, gendiag

    rng = np.random.default_rng(0)
    codes = [f"c{i}" for i in range(12)]
    records = [frozenset(rng.choice(codes, size=int(rng.integers(1, 5)), replace=False))
               for _ in range(40)]
    sets = {c: i % 3 for i, c in enumerate(codes)}
    rows = np.arange(len(records), dtype=np.int64)
    plain = CodeTable.build(records, sets)
    weighted = CodeTable.build(records, sets, {codes[0]: 2.0})
    gendiag(plain, rows, k=3, m=2)
    gendiag(weighted, rows, k=3, m=2)
    batch = ULBatch(plain, [rows[:20], rows[20:]], k=3, m=2)
    batch.run(np.arange(2, dtype=np.int64))


def _lda_calls() -> None:
    """LDA (and its baseline) anonymizing a small generated longitudinal extract, and the
    one kernel a release does not call (the per-candidate tight bounds, which the nearest
    search computes inline; the bound tests call it)."""
    from ehr_release import registry
    from ehr_release.algorithms.lda import make_model
    from ehr_release.algorithms.lda.anonymize import encode
    from ehr_release.algorithms.lda.cluster import _Pool, _Search
    from ehr_release.model.hierarchy import icd9_hierarchy
    from ehr_release.samples.sample import generate_sample, sample_vocabulary

    data = generate_sample(40, seed=3, longitudinal=True)
    for name in ("lda", "lda-baseline"):
        entry = registry.get(name)
        entry.anonymize(data, entry.parse({"k": "3"}), None)
    codes = [str(c) for c in sample_vocabulary().codes[:4]]
    model = make_model(icd9_hierarchy(), codes, w_icd=0.5, w_age=0.5, leaf_count=0)
    trajs = encode(model, [[(codes[0], 30), (codes[1], 31)], [(codes[2], 40)]])
    search = _Search(_Pool(trajs, model), model, "ags")
    search._tight_bounds(trajs[0], search.value_costs(trajs[0]), search.pool.alive())


CALLS: dict[str, Callable[[], None]] = {"artuc": _artuc_calls, "lda": _lda_calls}


def warm_up(say: Callable[[str], None] = print) -> dict[str, float]:
    """Compile (or load) every family's kernels; seconds per family. Idempotent: once the
    cache holds them, each family takes about a second (loading)."""
    spent = {}
    for family, calls in CALLS.items():
        started = time.perf_counter()
        calls()
        spent[family] = time.perf_counter() - started
        left = missing_kernels(family)
        state = "ready" if not left else f"not cached: {', '.join(left)}"
        say(f"{family} kernels: {spent[family]:.1f} s ({state})")
    return spent
