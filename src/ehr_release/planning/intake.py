"""Reading a release request's input and opening its run — plain functions, no Prefect.

The CLI calls these before it imports Prefect or starts a server, so a bad file or parameter
is refused at once; the flow's ``ingest`` task calls the same functions again (it must not
trust its caller).
"""

from __future__ import annotations

from ehr_release.core.canonical import canonical_json
from ehr_release.core.errors import EhrReleaseError, stored_message
from ehr_release.ingest import read_dataset
from ehr_release.model.dataset import Dataset
from ehr_release.planning.request import ComparisonRequest, ReleaseRequest
from ehr_release.storage import runs
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.destinations import resolve_destination
from ehr_release.storage.models import DatasetRecord
from ehr_release.storage.site_policy import require_source


def load_request_dataset(request: ReleaseRequest) -> Dataset:
    """Read the request's files into a Dataset (raises InputError naming file/row/column).

    A request made from a comparison row must read exactly the data that was compared.
    """
    dataset = read_dataset(request.input_path, request.diagnoses_path,
                           admissions_path=request.admissions_path,
                           class_column=request.class_column,
                           code_system=request.code_system,
                           code_mapping=request.code_mapping)
    expected = request.expected_fingerprint
    if expected is not None and dataset.fingerprint() != expected:
        raise EhrReleaseError(f"{request.input_path} is not the dataset the comparison was "
                              f"run on (SHA-256 {dataset.fingerprint()[:12]}…, expected "
                              f"{expected[:12]}…)")
    return dataset


def register_run(request: ReleaseRequest, dataset: Dataset, fingerprint: str) -> None:
    """Create the run (``requested``) or check that an existing one matches this request.

    The CLI registers the run before it starts the flow, so a flow killed while it reads the
    input still leaves a run behind (shown as stalled, with the command that resumes it).
    A run whose flow had already started is being resumed: that is an audit event.
    """
    existing = runs.find_run(request.run_id)
    if existing is None:
        require_source(request.source)
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
        record_event(actor=request.requester, action=AuditAction.RUN_RESUMED, run_id=request.run_id,
                     payload={"status": existing.status})


def load_comparison_dataset(request: ComparisonRequest) -> Dataset:
    """Read a comparison's input; a refusal is an ``ingest.rejected`` event (no value in it).

    The CLI calls it before Prefect starts, so a bad file fails at once; the comparison flow
    calls it again, since it must not trust its caller.
    """
    try:
        return read_dataset(request.input_path, request.diagnoses_path,
                            admissions_path=request.admissions_path,
                            class_column=request.class_column,
                            code_system=request.code_system,
                            code_mapping=request.code_mapping)
    except EhrReleaseError as exc:
        record_event(actor=request.requester, action=AuditAction.INGEST_REJECTED,
                     payload={"request": request.comparison_id, "input": request.input_path,
                              "error": stored_message(exc)})
        raise
