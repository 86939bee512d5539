"""``make test`` shares whole files out to parallel workers (issue 37 goal 6).

pytest-xdist hands out the files with the most tests first (``--dist loadfile`` reorders
them so by default). A conftest hook once put the files with a ``slow`` test first, which
that reordering undid; honoured (``--no-loadscope-reorder``) it ran the suite in 884 s
against 779 s, the heavy end-to-end files then all running at once, so it was removed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_make_test_runs_the_files_in_parallel_each_on_one_worker():
    makefile = (ROOT / "Makefile").read_text()
    args = re.search(r"^TEST_ARGS \?= (.*)$", makefile, re.M)
    assert args is not None and "$(TEST_ARGS)" in makefile
    assert "-n auto" in args[1] and "--dist loadfile" in args[1]
    # The kernels are compiled once before the workers start, not once per worker.
    assert re.search(r"^test: \$\(WARM\)$", makefile, re.M)
