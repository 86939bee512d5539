"""A failed run's explanation reaches the steward's terminal and nothing else.

What a failed verification measured may quote the data (a one-record class's codes), so
every store and Prefect get the names of the failed requirements only
(``tests/test_failed_verification_stored.py``). The CLI that started the run still waits on
the flow process's pipe: the flow process sends it the full text there
(``flows.launch.tell_terminal``), kept in process by the redaction
(``tasks.redaction.terminal_text``), and ``service.failure_explanation`` reads it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ehr_release import service
from ehr_release.core.errors import ConfigError
from ehr_release.flows.launch import tell_terminal
from ehr_release.tasks.redaction import redact, terminal_text

SECRET = "458.21"


def _failure() -> ConfigError:
    return ConfigError("utility constraints do not cover some codes of the data",
                       detail=SECRET)


def test_the_redaction_keeps_the_full_text_in_process_for_the_terminal_only() -> None:
    exc = _failure()
    clean = redact(exc)
    assert SECRET not in str(clean)  # what Prefect and the stores see
    assert SECRET in terminal_text(clean)
    assert terminal_text(ConfigError("another failure")) is None  # not the one kept
    assert terminal_text(KeyError(SECRET)) is None  # a bug's words are never sent


def test_the_flow_process_sends_the_explanation_down_the_pipe_and_never_blocks() -> None:
    read, write = os.pipe()
    tell_terminal(write, redact(_failure()))
    tell_terminal(write, KeyError(SECRET))  # nothing for a bug
    os.close(write)
    with os.fdopen(read, "rb") as got:
        assert got.read().decode().count(SECRET) == 1
    read, write = os.pipe()
    os.close(read)  # the CLI has gone
    tell_terminal(write, redact(_failure()))  # no BrokenPipeError
    os.close(write)


_FLOW = """
import sys, time
print("ready", flush=True)
time.sleep(0.3)
if sys.argv[1] == "explains":
    print("verification failed — k^m: support 1 (458.21)", flush=True)
"""


def _flow_process(mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _FLOW, mode], stdout=subprocess.PIPE)


def test_the_cli_reads_the_explanation_after_ready_or_nothing() -> None:
    proc = _flow_process("explains")
    service.wait_until_ready(proc)
    service.wait_until_ready(proc)  # a second call returns at once
    assert service.failure_explanation(proc) == "verification failed — k^m: support 1 (458.21)"
    proc.wait()
    proc = _flow_process("silent")
    service.wait_until_ready(proc)
    assert service.failure_explanation(proc) is None
    proc.wait()


def test_the_cli_waits_for_the_explanation_no_longer_than_its_timeout() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "print('ready', flush=True); "
                             "import time; time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        service.wait_until_ready(proc)
        start = time.monotonic()
        assert service.failure_explanation(proc, timeout_s=0.5) is None
        assert time.monotonic() - start < 5
    finally:
        proc.kill()
        proc.wait()


def test_the_cli_prints_one_error_line_the_full_explanation_when_there_is_one(
        monkeypatch, capsys) -> None:
    """Not the stored error and then the same sentence again with its detail: one line."""
    from ehr_release.commands import release as cli
    from ehr_release.storage import runs

    stored = "InputError: row 1, column 'ethnicity': value is not a node of the hierarchy"
    full = "row 1, column 'ethnicity': value is not a node of the hierarchy (found 'X')"
    monkeypatch.setattr(runs, "get_run", lambda run_id: type("Run", (), {"error": stored}))
    for sent, shown in ((full, full), (None, stored)):
        monkeypatch.setattr(service, "failure_explanation", lambda proc, sent=sent: sent)
        cli._tell_failure("rel-x", None)  # type: ignore[arg-type]
        assert capsys.readouterr().err == f"error: {shown}\n"
