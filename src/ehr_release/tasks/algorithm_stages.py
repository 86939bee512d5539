"""Anonymize, verify and evaluate: thin task wrappers around the registry entry's functions.

The wrappers add what Prefect is for — caching, artifacts, recording results — and nothing
else; the work is done by plain functions tested without Prefect. Status transitions are
made by the flow through :func:`~ehr_release.tasks.status.advance_task`, so a stage whose
result comes from the cache still moves the run along.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from ehr_release.dataset import Dataset
from ehr_release.files import sha256_bytes
from ehr_release.pseudonyms import pseudonymize_records, pseudonymizer
from ehr_release.randomness import check_random_state
from ehr_release.registry import ReleaseFiles
from ehr_release.registry import get as get_algorithm
from ehr_release.release_files import check_release_names
from ehr_release.reports import AttackReport, UtilityReport, VerificationReport
from ehr_release.storage import runs
from ehr_release.tasks.artifacts import md_table, stage_artifact
from ehr_release.tasks.caching import release_stage_key
from ehr_release.tasks.naming import stage_run_name
from ehr_release.verification import as_released, attack_release, verify_release, with_attack


def _seed(params: dict[str, Any]) -> int | None:
    seed = params.get("seed")
    return None if seed is None else int(seed)


# Keyed to the release id: a resumed run reuses its anonymization (and any privacy budget it
# spent) instead of drawing a second, different release from the same data.
@task(name="anonymize", task_run_name=stage_run_name("anonymize"),
      cache_key_fn=release_stage_key, persist_result=True)
def anonymize_task(run_id: str, dataset: Dataset, fingerprint: str, algorithm: str,
                   params: dict[str, Any]) -> ReleaseFiles:
    entry = get_algorithm(algorithm)
    parsed = entry.parse(params)
    files = entry.anonymize(dataset, parsed, check_random_state(_seed(parsed)))
    check_release_names(algorithm, files)
    if entry.id_file is not None:  # source ids (MRNs) never leave: see ehr_release.pseudonyms
        files = {**files, entry.id_file: pseudonymize_records(files[entry.id_file],
                                                              pseudonymizer(run_id))}
    sizes = [(name, f"{len(data):,} bytes") for name, data in sorted(files.items())]
    stage_artifact("anonymize", run_id, f"Algorithm `{algorithm}`\n\n"
                   + md_table(sizes, ("release file", "size")))
    return files


@task(name="pin-candidate", retries=2, retry_delay_seconds=1, cache_policy=None,
      persist_result=False)
def pin_candidate_task(run_id: str, files: ReleaseFiles) -> None:
    """Fix the hashes of this run's release; publish later refuses anything else."""
    runs.pin_candidate(run_id, {n: (sha256_bytes(d), len(d)) for n, d in files.items()})


@task(name="verify", task_run_name=stage_run_name("verify"), persist_result=False,
      cache_policy=None)
def verify_task(run_id: str, files: ReleaseFiles, dataset: Dataset, algorithm: str,
                params: dict[str, Any]) -> VerificationReport:
    """Re-check the guarantee with the independent verifier; record the verdict either way.

    On top of the algorithm's own requirements, every release is checked for source ids.
    """
    entry = get_algorithm(algorithm)
    report = verify_release(entry, files, dataset, entry.parse(params), run_id)
    runs.save_verification(run_id, report.to_dict())
    rows = [(r.name, r.required, r.measured, "PASS" if r.passed else "FAIL")
            for r in report.requirements]
    verdict = "**verified**" if report.holds else "**NOT verified — nothing will be published**"
    stage_artifact("verification", run_id, verdict + "\n\n"
                   + md_table(rows, ("requirement", "required", "measured", "result")))
    return report


@task(name="attack", task_run_name=stage_run_name("attack"), persist_result=False,
      cache_policy=None)
def attack_task(run_id: str, files: ReleaseFiles, dataset: Dataset, algorithm: str,
                params: dict[str, Any], verification: VerificationReport
                ) -> tuple[VerificationReport, AttackReport]:
    """Run the model's adversary on the published bytes; its verdict joins the verification.

    The attack shares no code with the algorithm or the model checks, and reads every
    published field: a release the verifier passed can still fail here.
    """
    entry = get_algorithm(algorithm)
    attack = attack_release(entry, files, dataset, entry.parse(params), run_id)
    report = with_attack(verification, attack)
    runs.save_verification(run_id, report.to_dict())
    tried = f"{attack.knowledge_sets_tried:,} ({'every one' if attack.exhaustive else 'sampled'})"
    smallest = ("–" if attack.smallest_candidate_set is None
                else f"{attack.smallest_candidate_set:,} (required ≥ {attack.threshold:,})")
    stage_artifact("attack-audit", run_id, ("**passed**" if attack.passed else
                                            "**FAILED — nothing will be published**")
                   + "\n\n" + md_table([
                       ("attacker model", attack.attacker_model), ("knowledge sets", tried),
                       ("smallest candidate set", smallest),
                       ("measured", attack.measured or "–"),
                       ("seconds", f"{attack.seconds:.2f}")], ("attack audit", "value")))
    return report, attack


@task(name="evaluate", task_run_name=stage_run_name("evaluate"), persist_result=False,
      cache_policy=None)
def evaluate_task(run_id: str, files: ReleaseFiles, dataset: Dataset, algorithm: str,
                  params: dict[str, Any]) -> UtilityReport:
    entry = get_algorithm(algorithm)
    parsed = entry.parse(params)
    report = entry.evaluate(files, as_released(entry, dataset, run_id), parsed,
                            check_random_state(_seed(parsed)))
    runs.save_utility(run_id, report.to_dict())
    stage_artifact("utility", run_id, md_table(
        [(k, f"{v:.6g}") for k, v in report.metrics.items()], ("metric", "value")))
    return report
