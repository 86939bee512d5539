"""Issue 16: recipient, purpose, terms and expiry captured at request time, required by a
site policy, and carried with the comparison row a run was chosen from; the software version
names its commit and never fails.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import date
from pathlib import Path

import pytest
from pydantic import ValidationError

from ehr_release import version
from ehr_release.core.errors import EhrReleaseError
from ehr_release.planning.request import (
    REQUIRE_DATA_USE_ENV,
    DataUse,
    ReleaseRequest,
    check_data_use_policy,
)
from ehr_release.storage import runs

TODAY = date(2026, 11, 22)


def _request(**extra: object) -> ReleaseRequest:
    return ReleaseRequest(run_id="rel-" + "1" * 32, input_path="x.csv",
                          algorithm="disassociation", params={"k": "3"}, requester="steward",
                          out_dir="/tmp/out", **extra)


FULL = {"recipient": "Dr. Ada Lovelace", "purpose": "comorbidity study",
        "terms": "no linkage", "expires": "2027-12-31"}


def test_without_the_policy_nothing_is_required(ehr_home,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_DATA_USE_ENV, raising=False)
    check_data_use_policy(_request(), today=TODAY)


def test_the_policy_names_every_missing_option_in_one_message(
        ehr_home, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_DATA_USE_ENV, "1")
    with pytest.raises(EhrReleaseError) as err:
        check_data_use_policy(_request(recipient="Dr. Ada Lovelace", terms="   "), today=TODAY)
    message = str(err.value)
    assert "ehr-release policy data-use on" in message
    assert "missing: --purpose, --terms, --expires" in message  # a blank answer is none
    check_data_use_policy(_request(**FULL), today=TODAY)


def test_expiry_is_an_iso_date_in_the_future(ehr_home,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_DATA_USE_ENV, raising=False)
    with pytest.raises(ValidationError, match="ISO date"):
        _request(expires="31/12/2027")
    assert _request(expires="2027-12-31").expires == "2027-12-31"
    with pytest.raises(EhrReleaseError, match="not after today"):
        check_data_use_policy(_request(expires="2026-11-22"), today=TODAY)


def test_data_use_carries_expiry_and_the_comparison_row(tmp_path: Path) -> None:
    folder = tmp_path / "comparisons" / ("cmp-" + "2" * 32)
    folder.mkdir(parents=True)
    request = _request(**FULL).with_comparison(folder, 4)
    assert request.data_use == DataUse(recipient="Dr. Ada Lovelace",
                                       purpose="comorbidity study", terms="no linkage",
                                       expires="2027-12-31",
                                       comparison_id="cmp-" + "2" * 32, comparison_row=4)
    assert _request().with_comparison(None, None).comparison_id is None
    # The parked bundle stores asdict(data_use) and reads DataUse(**json) back days later.
    stored = json.loads(json.dumps(dataclasses.asdict(request.data_use)))
    assert DataUse(**stored) == request.data_use


def test_a_deployment_started_run_is_refused_by_the_policy(
        ehr_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow's ingest checks the policy itself: a deployment never passes the CLI."""
    from ehr_release.tasks.ingest import ingest_task

    monkeypatch.setenv(REQUIRE_DATA_USE_ENV, "1")
    request = _request(recipient="Dr. Ada Lovelace")
    with pytest.raises(EhrReleaseError, match="missing: --purpose, --terms, --expires"):
        ingest_task.fn(request)
    assert runs.find_run(request.run_id) is None


def test_version_names_the_commit_or_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    version.commit.cache_clear()
    monkeypatch.setenv(version.COMMIT_ENV, "abc123def456")
    assert version.software_version().endswith("(commit abc123def456)")
    version.commit.cache_clear()
    monkeypatch.delenv(version.COMMIT_ENV)
    monkeypatch.setattr(version, "_PACKAGE", Path("/"))  # not a checkout
    assert version.commit() == version.UNKNOWN
    version.commit.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")  # no git at all
    assert version.commit() == version.UNKNOWN
    version.commit.cache_clear()


def test_the_cli_refuses_missing_terms_before_reading_the_data(ehr_home, tmp_path,
                                                                monkeypatch) -> None:
    from typer.testing import CliRunner

    from ehr_release.cli import app
    from ehr_release.storage import runs

    monkeypatch.setenv("EHR_RELEASE_REQUIRE_DATA_USE", "1")
    data = tmp_path / "x.csv"
    data.write_text("patient_id,codes\nA,401.9\nB,401.9\n")
    done = CliRunner().invoke(app, ["run", "--input", str(data), "--algorithm",
                                    "disassociation", "--param", "k=2", "--requester", "sam",
                                    "--recipient", "Dr. A", "--out", str(tmp_path / "o")])
    assert done.exit_code == 1 and "--purpose" in done.output and "--expires" in done.output
    assert runs.list_runs() == []
