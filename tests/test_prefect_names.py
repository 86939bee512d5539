"""Issue 34 finding 6, the parts that need no server: task-run names without the site's
folders, narrow artifact tables, stage lines in figures (the flow run itself is read back
in ``test_prefect_run_log.py``)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from ehr_release.model.reports import Requirement, VerificationReport
from ehr_release.tasks.artifacts import MAX_COLUMNS, md_table
from ehr_release.tasks.naming import candidate_run_name, run_tags, stage_run_name


def test_a_parameter_naming_a_site_file_shows_its_file_name_only() -> None:
    """ArtUC's task runs were named ``anonymize[artuc config=/home/…/config.yaml]``."""
    request = SimpleNamespace(params={"config": "/srv/site/secret-folder/config.yaml",
                                      "k": "5"})
    plan = SimpleNamespace(algorithm="artuc", request=request)
    assert stage_run_name("anonymize")({"plan": plan}) == "anonymize[artuc config=config.yaml k=5]"
    candidate = SimpleNamespace(index=2, algorithm="artuc",
                                params={"config": "/srv/site/x/config.yaml"})
    assert candidate_run_name({"candidate": candidate}) == "candidate[2: artuc config=config.yaml]"
    assert run_tags("rel-1", "artuc", "icu") == ["algorithm:artuc", "run:rel-1", "source:icu"]


def test_the_verification_artifact_keeps_its_table_narrow() -> None:
    """The four-column table (requirement, required, measured, result) was cut off in the
    UI: the verdict column went first. Now two columns, the long words in a list."""
    from ehr_release.tasks.algorithm_stages import verdict_line, verification_markdown

    report = VerificationReport("x", [
        Requirement("chunk k^m-anonymity", "every chunk " * 20, "support 5 | of 7", True),
        Requirement("truthfulness", "counts equal", "a | b", False)])
    shown = verification_markdown(report)
    rows = [ln for ln in shown.splitlines() if ln.startswith("|")]
    assert rows[0] == "| requirement | result |"
    assert "| chunk k^m-anonymity | PASS |" in rows and "| truthfulness | FAIL |" in rows
    assert "measured: support 5 \\| of 7" in shown
    assert verdict_line(report) == ("1 of 2 requirements hold; NOT holding: truthfulness — "
                                    "nothing will be published")
    with pytest.raises(ValueError, match=f"at most {MAX_COLUMNS} columns"):
        md_table([("a",) * 5], ("1", "2", "3", "4", "5"))


def test_a_stage_line_outside_a_flow_goes_to_the_projects_logger(caplog) -> None:
    from ehr_release.tasks.logs import size, stage_log

    with caplog.at_level(logging.INFO, logger="ehr_release.flow"):
        stage_log("anonymize", f"wrote 2 files ({size(3_500_000)})")
    assert caplog.messages == ["anonymize: wrote 2 files (3.3 MB)"]
    assert size(512) == "512 bytes"
