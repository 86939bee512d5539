"""Verifying a release the same way wherever it happens: in the release flow, in each
comparison candidate and in ``ehr-release verify``.

First the closed world: the release must hold exactly the files, fields and value types its
format declares (:mod:`ehr_release.privacy.closed_world`); a release that does not is not
checked further, since the model says nothing about an undeclared field. Then the
algorithm's own verifier checks its guarantee against the original data seen under the ids
the release uses (its pseudonyms, for algorithms that publish per-patient records); then
every release, whatever the algorithm, is checked for source patient ids. The attack audit
(:func:`attack_release`) runs after, as its own stage.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ehr_release.governance.pseudonyms import (
    pseudonymize_dataset,
    pseudonymize_records,
    pseudonymizer,
)
from ehr_release.model.dataset import Dataset
from ehr_release.model.reports import AttackReport, Requirement, VerificationReport
from ehr_release.privacy.closed_world import closed_world_requirement
from ehr_release.privacy.identifiers import source_ids_requirement
from ehr_release.privacy.release_files import check_release_names
from ehr_release.registry import AlgorithmEntry, ReleaseFiles

if TYPE_CHECKING:
    import numpy as np


def anonymize_as_released(entry: AlgorithmEntry, dataset: Dataset, params: dict[str, Any],
                          rng: np.random.Generator, release_id: str) -> ReleaseFiles:
    """The entry's anonymization exactly as it would be published: its file names checked,
    and the source ids of its id file replaced by ``release_id``'s pseudonyms (source ids,
    MRNs, never leave; see :mod:`ehr_release.governance.pseudonyms`). A release run and every
    candidate
    of a comparison go through here, so both are verified on the same kind of bytes."""
    files = entry.anonymize(dataset, params, rng)
    check_release_names(entry.name, files)
    if entry.id_file is not None:
        files = {**files, entry.id_file: pseudonymize_records(files[entry.id_file],
                                                              pseudonymizer(release_id))}
    return files


def as_released(entry: AlgorithmEntry, dataset: Dataset, release_id: str | None) -> Dataset:
    """The original data under the ids the release uses."""
    if entry.id_file is None or release_id is None:
        return dataset
    return pseudonymize_dataset(dataset, pseudonymizer(release_id))


def verify_release(entry: AlgorithmEntry, files: ReleaseFiles, dataset: Dataset,
                   params: dict[str, Any], release_id: str | None) -> VerificationReport:
    """Closed world, the algorithm's verifier and the source-id check, as one report."""
    closed = closed_world_requirement(files, entry.schema)
    ids = source_ids_requirement(files, dataset.patient_ids)
    if not closed.passed:
        return VerificationReport(entry.name, [closed, ids])
    report = entry.verify(files, as_released(entry, dataset, release_id), params)
    return VerificationReport(report.algorithm, [closed, *report.requirements, ids])


def attack_release(entry: AlgorithmEntry, files: ReleaseFiles, dataset: Dataset,
                   params: dict[str, Any], release_id: str | None) -> AttackReport:
    """The model's adversary run on the published bytes.

    Fails closed: an algorithm without a registered attack, or an attack that cannot read
    the release, fails the audit. The failure names the exception's type only — its message
    could quote a release value.
    """
    if entry.attack is None:
        return AttackReport(attacker_model="none registered", knowledge_sets_tried=0,
                            exhaustive=False, smallest_candidate_set=None, threshold=0,
                            passed=False, measured="no attack audit for this algorithm")
    started = time.perf_counter()
    try:
        report = entry.attack(files, as_released(entry, dataset, release_id), params)
    except Exception as exc:  # noqa: BLE001 - any failure to attack is a failed audit
        return AttackReport(attacker_model="the registered attack", knowledge_sets_tried=0,
                            exhaustive=False, smallest_candidate_set=None, threshold=0,
                            passed=False, seconds=time.perf_counter() - started,
                            measured=f"the attack could not run on this release "
                                     f"({type(exc).__name__})")
    return AttackReport(**{**report.to_dict(), "seconds": time.perf_counter() - started})


def verify_and_attack(entry: AlgorithmEntry, files: ReleaseFiles, dataset: Dataset,
                      params: dict[str, Any], release_id: str | None
                      ) -> tuple[VerificationReport, AttackReport | None]:
    """The whole verification: the checks above, then — if they hold — the attack audit.

    A release that fails the closed world or its model is not attacked (the attack reads the
    declared format and would only restate the failure); its attack report is None.
    """
    report = verify_release(entry, files, dataset, params, release_id)
    if not report.holds:
        return report, None
    attack = attack_release(entry, files, dataset, params, release_id)
    return with_attack(report, attack), attack


def with_attack(report: VerificationReport, attack: AttackReport) -> VerificationReport:
    """The verification report with the attack audit's verdict as one more requirement."""
    kept: list[Requirement] = [r for r in report.requirements if r.name != "attack audit"]
    return VerificationReport(report.algorithm, [*kept, attack.requirement()])
