"""Verifying a release the same way wherever it happens: in the flow and in ``ehr-release
verify``.

The algorithm's own verifier checks its guarantee against the original data seen under the
ids the release uses (its pseudonyms, for algorithms that publish per-patient records); then
every release, whatever the algorithm, is checked for source patient ids.
"""

from __future__ import annotations

from typing import Any

from ehr_release.dataset import Dataset
from ehr_release.privacy.identifiers import source_ids_requirement
from ehr_release.pseudonyms import pseudonymize_dataset, pseudonymizer
from ehr_release.registry import AlgorithmEntry, ReleaseFiles
from ehr_release.reports import VerificationReport


def as_released(entry: AlgorithmEntry, dataset: Dataset, release_id: str | None) -> Dataset:
    """The original data under the ids the release uses."""
    if entry.id_file is None or release_id is None:
        return dataset
    return pseudonymize_dataset(dataset, pseudonymizer(release_id))


def verify_release(entry: AlgorithmEntry, files: ReleaseFiles, dataset: Dataset,
                   params: dict[str, Any], release_id: str | None) -> VerificationReport:
    """The algorithm's verifier plus the source-id check, as one report."""
    report = entry.verify(files, as_released(entry, dataset, release_id), params)
    return VerificationReport(report.algorithm, [
        *report.requirements, source_ids_requirement(files, dataset.patient_ids)])
