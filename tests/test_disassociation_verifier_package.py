"""Issue 17 part 5: the disassociation verifier as a package behind the wall.

* its pair enumeration is its own (``algorithms/`` has another) and is checked here against
  ``itertools.combinations`` on random CSR rows;
* no module of the package imports ``ehr_release.algorithms``;
* the names callers import from ``ehr_release.privacy.disassociation`` are still there.
"""

from __future__ import annotations

import ast
from itertools import combinations
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import ehr_release.privacy.disassociation as verifier
from ehr_release.privacy.disassociation.arrays import pairs_within

row_lengths = st.lists(st.integers(0, 9), max_size=30)


@given(row_lengths)
def test_pairs_within_lists_each_pair_of_each_row_once(lengths):
    indptr = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    first, second = pairs_within(indptr)
    expected = sorted(pair for start, end in zip(indptr[:-1], indptr[1:], strict=True)
                      for pair in combinations(range(int(start), int(end)), 2))
    got = sorted(zip(first.tolist(), second.tolist(), strict=True))
    assert got == expected
    assert first.dtype == np.int64 and second.dtype == np.int64


def test_pairs_within_of_no_rows_and_of_single_codes_is_empty():
    for indptr in (np.zeros(1, dtype=np.int64), np.arange(5, dtype=np.int64)):
        first, second = pairs_within(indptr)
        assert len(first) == len(second) == 0


def test_no_module_of_the_verifier_imports_the_algorithm():
    folder = Path(verifier.__file__).parent
    modules = sorted(folder.glob("*.py"))
    assert len(modules) > 5
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.startswith("ehr_release.algorithms")], path.name


def test_the_public_names_are_importable_from_the_package():
    for name in ("verify", "check_km", "parse_release", "build_tables", "analyse", "analyse_tables",
                 "caps_small", "caps_general", "chunk_counts_small", "chunk_counts_general",
                 "original_counts_small", "original_counts_general", "shape_problems",
                 "domain_problems", "Tables", "Findings", "ReleaseRejected", "NAME",
                 "RELEASE_FILE", "MAX_EVIDENCE"):
        assert hasattr(verifier, name), name
    assert verifier.NAME == "disassociation" and verifier.RELEASE_FILE == "release.parquet"
