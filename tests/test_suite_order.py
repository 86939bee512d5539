"""``make test`` shares whole files out to parallel workers, the slow files first (issue 37
goal 6): :func:`tests.conftest.slow_first`, and the Makefile's options that rely on it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import slow_first

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Item:
    """What slow_first reads of a pytest item: its file and its markers."""

    path: Path
    name: str
    slow: bool = False

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def test_files_with_a_slow_test_come_first_each_file_whole_and_in_order():
    items = [Item(Path("a.py"), "a1"), Item(Path("a.py"), "a2"),
             Item(Path("b.py"), "b1"), Item(Path("b.py"), "b2", slow=True),
             Item(Path("c.py"), "c1"), Item(Path("d.py"), "d1", slow=True)]
    assert [i.name for i in slow_first(items)] == ["b1", "b2", "d1", "a1", "a2", "c1"]


def test_make_test_runs_the_files_in_parallel_each_on_one_worker():
    makefile = (ROOT / "Makefile").read_text()
    args = re.search(r"^TEST_ARGS \?= (.*)$", makefile, re.M)
    assert args is not None and "$(TEST_ARGS)" in makefile
    assert "-n auto" in args[1] and "--dist loadfile" in args[1]
    # The kernels are compiled once before the workers start, not once per worker.
    assert re.search(r"^test: \$\(WARM\)$", makefile, re.M)
