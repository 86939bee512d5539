"""Issue 35 end to end: an OMOP folder with ICD-10-CM source codes, a FHIR bulk export and
a MIMIC-IV ``hosp`` folder each go through the governed flow (ingest → anonymize → verify →
attack audit → certify → approve → publish), and the documents name the code system and
its edition (slow: starts Prefect)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ehr_release.model.hierarchy import CODE_SYSTEMS
from ehr_release.samples.sample import generate_sample
from ehr_release.samples.sample_layouts import WRITERS, numbered
from ehr_release.storage import runs
from ehr_release.storage.runs import Status
from tests.flow_helpers import decide, request_for, start, wait_status

pytestmark = pytest.mark.slow


def _pdf_text(path: Path) -> str:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) not installed")
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


# LDA on 60 generated patients measures below its trivial baseline: the waiver (printed on
# the certificate) lets the longitudinal path be published here all the same.
@pytest.mark.parametrize(("layout", "algorithm", "params"), [
    ("omop", "disassociation", {"k": "3", "m": "2"}),
    ("fhir", "lda", {"k": "3"}),
    ("mimic4", "disassociation", {"k": "3", "m": "2", "policy": "hierarchy:section"}),
])
def test_folder_is_published_with_its_code_system_on_the_documents(
        harness, ehr_home, tmp_path, layout: str, algorithm: str, params: dict) -> None:
    patients = numbered(generate_sample(60, seed=8, longitudinal=True, code_system="icd10"))
    folder = WRITERS[layout](patients, tmp_path / layout)
    out = tmp_path / "out"
    req = request_for(folder, out, algorithm=algorithm,
                      allow_low_utility=algorithm == "lda")
    req = req.model_copy(update={"params": params})
    thread, box = start(req)
    reached = wait_status(req.run_id, {Status.AWAITING_APPROVAL, Status.FAILED}, timeout=400)
    assert reached == Status.AWAITING_APPROVAL, runs.get_run(req.run_id).error
    decide(req.run_id, "approve")
    thread.join(300)
    assert box.get("result") == "published", (box, runs.get_run(req.run_id).error)
    dataset = runs.get_dataset(runs.get_run(req.run_id).dataset_id)
    assert json.loads(dataset.columns_json)["codes"] == "multiset[icd10]+age"
    edition = CODE_SYSTEMS["icd10"].edition
    sheet = " ".join(_pdf_text(out / "releases" / req.run_id / "datasheet.pdf").split())
    assert "Diagnosis codes" in sheet and edition.split(" (")[0] in sheet
    filed = next(a for a in runs.list_artifacts(req.run_id) if a.kind == "certificate")
    certificate = " ".join(_pdf_text(Path(filed.path)).split())
    assert edition.split(" (")[0] in certificate
    assert "diagnosis codes (ICD-10-CM) with age at diagnosis" in certificate
