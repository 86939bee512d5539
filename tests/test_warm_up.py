"""Compiling the numba kernels ahead (issue 34 finding 2, issue 37 goal 4).

Each check runs in a fresh process: what a process compiles or loads is decided when the
kernels' module is imported, so it cannot be changed within this one. The first has its own
empty numba cache (``NUMBA_CACHE_DIR``), as a fresh clone has; the second uses the
checkout's own (``make test`` has warmed it up already; compiling everything again would
cost the suite a minute).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def in_fresh_process(code: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_a_run_that_would_compile_says_so_and_others_import_no_numba(tmp_path):
    done = in_fresh_process(
        "import json, sys\n"
        "from ehr_release.registry.warm_up import announce_compile\n"
        "other = announce_compile('disassociation')\n"
        "print(json.dumps({'other': other, 'numba': 'numba' in sys.modules,\n"
        "                  'artuc': announce_compile('artuc'),"
        " 'lda': announce_compile('lda')}))\n",
        tmp_path / "numba")
    shown = json.loads(done.stdout)
    assert shown == {"other": False, "numba": False, "artuc": True, "lda": True}
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and all("ehr-release warm-up" in line for line in lines)
    assert lines[0].startswith("artuc: compiling") and lines[1].startswith("lda: compiling")


def test_listing_the_registry_loads_no_kernel():
    """Every release lists the registry before it anonymizes (which algorithms spend ε:
    ``storage.budget.dp_algorithm_names``); LDA's entry once imported its algorithm, and with
    it numba, on that path: 0.31 s of every run's wall, whatever its algorithm."""
    done = in_fresh_process(
        "import sys\n"
        "from ehr_release.storage.budget import dp_algorithm_names\n"
        "assert 'diffgen' in dp_algorithm_names()\n"
        "print(sorted(m for m in ('numba', 'llvmlite') if m in sys.modules))\n")
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_after_the_warm_up_a_release_loads_every_kernel_and_compiles_none():
    in_fresh_process("from ehr_release.registry.warm_up import warm_up; warm_up()")
    # Another process, other data, as ArtUC's and LDA's releases call the kernels.
    done = in_fresh_process(
        "import json\n"
        "import numpy as np\n"
        "from ehr_release import registry\n"
        "from ehr_release.algorithms.artuc import gendiag_kernel\n"
        "from ehr_release.algorithms.lda import kernels\n"
        "from ehr_release.samples.sample import generate_sample\n"
        "from ehr_release.registry.warm_up import announce_compile, missing_kernels, _artuc_calls\n"
        "before = {f: missing_kernels(f) for f in ('artuc', 'lda')}\n"
        "said = [announce_compile(a) for a in ('artuc', 'lda')]\n"
        "data = generate_sample(70, seed=9, longitudinal=True)\n"
        "entry = registry.get('lda')\n"
        "entry.anonymize(data, entry.parse({'k': '4'}), None)\n"
        "_artuc_calls()\n"
        "misses = {d.__name__: sum(d.stats.cache_misses.values())\n"
        "          for m in (gendiag_kernel, kernels) for d in vars(m).values()\n"
        "          if hasattr(d, 'stats') and d.signatures}\n"
        "print(json.dumps({'before': before, 'said': said, 'misses': misses}))\n")
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown["before"] == {"artuc": [], "lda": []}
    assert shown["said"] == [False, False]
    assert shown["misses"] and not any(shown["misses"].values()), shown["misses"]
