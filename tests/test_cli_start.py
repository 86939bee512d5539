"""Parsing a command imports nothing heavy (issue 37 goal 3: quick commands start quickly).

Each case runs the real entry point in a fresh interpreter and reports which of the heavy
libraries ended up in ``sys.modules``; the command modules (:mod:`ehr_release.commands`)
must load them only inside the command that needs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
#: Pydantic too: Typer coerced every value through a Pydantic adapter (≈ 0.1 s of CPU),
#: ``status --help`` included; plain values now skip it (cli_support.plain_params).
HEAVY = ("prefect", "pandas", "sqlalchemy", "sqlmodel", "weasyprint", "numpy", "rich",
         "argon2", "jinja2", "matplotlib", "pydantic")

PROBE = """
import json, sys
sys.argv = ["ehr-release", *json.loads(sys.argv[1])]
from ehr_release import cli
from ehr_release.cli import run_cli
cli._leave = sys.exit  # raise, not end the interpreter: the probe reads sys.modules after
try:
    run_cli()
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def loaded(args: list[str], home: Path) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "EHR_"))}
    env.update(PYTHONPATH=str(SRC), EHR_RELEASE_HOME=str(home))
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [["--help"], ["status", "--help"], ["list", "--help"],
                                  ["run", "--help"], ["approve", "--help"],
                                  ["audit", "export", "--help"]])
def test_parsing_a_command_imports_no_heavy_library(args: list[str], tmp_path: Path) -> None:
    assert loaded(args, tmp_path) & set(HEAVY) == set()


def test_listing_runs_loads_the_database_but_no_data_library(tmp_path: Path) -> None:
    """``list`` in a fresh home (no database file yet) takes the full path, which creates
    the database with SQLAlchemy, but loads neither Prefect, pandas, numpy, the PDF
    renderer nor the password hasher. (On an existing SQLite database it loads none of the
    database libraries either: tests/test_quick_read.py.)"""
    modules = loaded(["list"], tmp_path)
    assert "sqlalchemy" in modules  # the probe saw the command run
    assert modules & {"prefect", "pandas", "numpy", "weasyprint", "argon2", "rich"} == set()


@pytest.mark.parametrize("value", ["rel-9eb5", "", " spaced ", "ünïcode", "50", "007", "-1",
                                   "x", "1.5", "٣", True, False, 7, None])
@pytest.mark.parametrize("annotation", [str, int, bool])
def test_plain_values_match_typers_own_coercion(annotation: type, value: object) -> None:
    """Where the short cut answers, it answers what Typer's Pydantic adapter answers; where
    the adapter would convert or refuse something else, the short cut declines."""
    from typer._coercion import build_runtime_param, resolve_type_descriptor
    from typer.models import OptionInfo

    from ehr_release.cli_support.plain_params import _NOT_PLAIN, plain_value

    plain = plain_value(annotation, value)
    if plain is _NOT_PLAIN:
        return
    adapter = build_runtime_param(resolve_type_descriptor(annotation, OptionInfo())).adapter
    expected = adapter.validate_python(value)
    assert plain == expected and type(plain) is type(expected)


def test_a_bad_number_keeps_typers_message(tmp_path: Path) -> None:
    """A value the short cut declines still gets Typer's check and words."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "EHR_"))}
    env.update(PYTHONPATH=str(SRC), EHR_RELEASE_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "ehr_release.cli", "list", "--limit", "x"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "valid integer" in done.stderr, done.stderr


LEAVE_PROBE = """
import atexit, json, sys, threading
sys.argv = ["ehr-release", *json.loads(sys.argv[1])]
atexit.register(print, "teardown ran")
if sys.argv[1:2] == ["list"] and len(sys.argv) > 2:
    sys.argv.pop()
    threading.Thread(target=threading.Event().wait, daemon=True).start()
from ehr_release.cli import run_cli
run_cli()
"""


@pytest.mark.parametrize(("args", "code", "teardown"), [
    (["list"], 0, False),  # nothing waits on the teardown: skipped, output still flushed
    (["status", "rel-unknown"], 1, False),  # the exit code and the message kept
    (["bogus"], 2, False),  # a usage error as Click reports it
    (["list", "thread"], 0, True),  # another thread running: the normal exit
])
def test_a_command_leaves_without_the_teardown_only_when_nothing_needs_it(
        args: list[str], code: int, teardown: bool, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "EHR_"))}
    env.update(PYTHONPATH=str(SRC), EHR_RELEASE_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", LEAVE_PROBE, json.dumps(args)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == code
    assert ("teardown ran" in done.stdout) is teardown
    if args[0] == "list":
        assert done.stdout.startswith("RUN") or "no release runs" in done.stdout + done.stderr
    elif code == 1:
        assert "rel-unknown" in done.stderr
    else:
        assert "No such command" in done.stderr
