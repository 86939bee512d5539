"""The flow process's head start (issue 18 goal 1): a plan it made while waiting for ``go``
is used only for the very request it was made from; the stages' modules are loaded."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ehr_release.flows.head_start import head_start, load_stage_modules
from ehr_release.planning.plan import make_plan
from ehr_release.registry import get as get_algorithm
from ehr_release.runtime.cpus import usable_cpus
from ehr_release.tasks import aside, ingest
from tests.flow_helpers import request_for

pytestmark = pytest.mark.usefixtures("aside_stopped", "cpu_free")


@pytest.fixture
def data(flow_csv: Path) -> Path:
    return flow_csv


def test_the_offered_plan_serves_only_its_own_request_and_only_once(
        data: Path, tmp_path: Path) -> None:
    request = request_for(data, tmp_path / "out", algorithm="disassociation")
    plan = make_plan(request)
    ingest.offer_plan(plan)
    assert ingest._made_plan(request) is plan
    again = ingest._made_plan(request)  # taken once: a retry reads the input again
    assert again is not plan and again.fingerprint == plan.fingerprint
    other = request.model_copy(update={"params": {"k": "4"}})
    ingest.offer_plan(plan)
    made = ingest._made_plan(other)
    assert made is not plan and made.params["k"] == 4
    assert ingest._offered == []


def test_head_start_offers_the_plan_of_the_request_file(data: Path, tmp_path: Path) -> None:
    request = request_for(data, tmp_path / "out", algorithm="disassociation")
    path = tmp_path / "request.json"
    path.write_text(request.model_dump_json())
    head_start(path)
    plan = ingest._made_plan(request)
    assert plan.request == request and plan.fingerprint == make_plan(request).fingerprint
    assert ingest._offered == []
    # the second process, spawned for a thread runner on a machine with a second CPU
    assert (aside._worker is not None) == (usable_cpus() > 1)


def test_head_start_spawns_no_second_process_for_a_dask_runner(
        data: Path, tmp_path: Path) -> None:
    request = request_for(data, tmp_path / "out", algorithm="disassociation",
                          task_runner="dask:2")
    path = tmp_path / "request.json"
    path.write_text(request.model_dump_json())
    head_start(path)
    assert aside._worker is None
    assert ingest._made_plan(request).request == request


def test_head_start_is_silent_about_a_bad_input_and_offers_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("patient_id,codes\nA,not-a-code\n")
    request = request_for(bad, tmp_path / "out", algorithm="disassociation")
    path = tmp_path / "request.json"
    path.write_text(request.model_dump_json())
    head_start(path)  # the ingest stage meets the bad file again and reports it
    assert ingest._offered == []
    head_start(tmp_path / "missing.json")
    assert ingest._offered == []


def test_the_stage_modules_of_an_algorithm_are_loaded() -> None:
    names = get_algorithm("disassociation").stage_modules()
    assert "ehr_release.utility.disassociation" in names
    assert "ehr_release.privacy.attacks.disassociation" in names
    load_stage_modules(request=None)
    assert "weasyprint" in sys.modules and "matplotlib.pyplot" in sys.modules
