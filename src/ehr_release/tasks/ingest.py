"""Ingest: read and validate the extract, register the dataset and open the run."""

from __future__ import annotations

from prefect import task

from ehr_release.dataset import Dataset
from ehr_release.destinations import resolve_destination
from ehr_release.errors import EhrReleaseError
from ehr_release.ingest import read_dataset
from ehr_release.registry import get as get_algorithm
from ehr_release.request import ReleaseRequest
from ehr_release.storage import runs
from ehr_release.storage.audit import canonical_json, record_event
from ehr_release.storage.models import DatasetRecord
from ehr_release.tasks.artifacts import md_table, stage_artifact
from ehr_release.tasks.retry import is_transient


def load_request_dataset(request: ReleaseRequest) -> Dataset:
    """Read the request's files into a Dataset (raises InputError naming file/row/column).

    A request made from a comparison row must read exactly the data that was compared.
    """
    dataset = read_dataset(request.input_path, request.diagnoses_path,
                           admissions_path=request.admissions_path,
                           class_column=request.class_column)
    expected = request.expected_fingerprint
    if expected is not None and dataset.fingerprint() != expected:
        raise EhrReleaseError(f"{request.input_path} is not the dataset the comparison was "
                              f"run on (SHA-256 {dataset.fingerprint()[:12]}…, expected "
                              f"{expected[:12]}…)")
    return dataset


# Raw patient data must never land in Prefect's result storage: no caching, no persistence.
@task(name="ingest", retries=2, retry_delay_seconds=1, retry_condition_fn=is_transient,
      persist_result=False, cache_policy=None)
def ingest_task(request: ReleaseRequest) -> tuple[Dataset, str]:
    """Validate parameters and input, then register the dataset and the run (``requested``).

    Parameters are checked before any row is stored, so a bad request leaves no run behind.
    If the run already exists (a resumed run after a crash) it must match this request.
    """
    get_algorithm(request.algorithm).parse(request.params)
    dataset = load_request_dataset(request)
    fingerprint = dataset.fingerprint()
    stage_artifact("ingest", request.run_id, md_table(
        [("patients", str(dataset.n_patients)), ("diagnosis rows", str(len(dataset.diagnoses))),
         ("distinct codes", str(dataset.diagnoses["code"].nunique())),
         ("longitudinal", str(dataset.is_longitudinal)), ("SHA-256", fingerprint)],
        ("dataset", "value")))
    register_run(request, dataset, fingerprint)
    return dataset, fingerprint


def register_run(request: ReleaseRequest, dataset: Dataset, fingerprint: str) -> None:
    """Create the run (``requested``) or check that an existing one matches this request.

    The CLI registers the run before it starts the flow, so a flow killed while it reads the
    input still leaves a run behind (shown as stalled, with the command that resumes it).
    A run whose flow had already started is being resumed: that is an audit event.
    """
    existing = runs.find_run(request.run_id)
    if existing is None:
        # However the run was started (CLI, deployment): the checked, resolved destination.
        destination = str(resolve_destination(request.out_dir))
        record = DatasetRecord(fingerprint=fingerprint, rows=dataset.n_patients,
                               codes=len(dataset.diagnoses),
                               columns_json=canonical_json(dataset.schema()),
                               source=dataset.source)
        runs.create_run(run_id=request.run_id, dataset=record, requester=request.requester,
                        algorithm=request.algorithm, parameters=dict(request.params),
                        out_dir=destination)
        return
    runs.check_resumable(existing, fingerprint=fingerprint, algorithm=request.algorithm,
                         parameters=dict(request.params))
    if existing.flow_run_id is not None:
        record_event(actor=request.requester, action="run.resumed", run_id=request.run_id,
                     payload={"status": existing.status})
