"""Anonymize, verify and evaluate: thin task wrappers around the registry entry's functions.

The wrappers add what Prefect is for — caching, artifacts, recording results — and nothing
else; the work is done by plain functions tested without Prefect. Each takes the run's
:class:`~ehr_release.planning.plan.ReleasePlan` (typed parameters, dataset, entry), made once by the
ingest stage. Status transitions are made by the flow through
:func:`~ehr_release.tasks.status.advance_task`, so a stage whose result comes from the cache
still moves the run along.
"""

from __future__ import annotations

import time

from prefect import get_run_logger, task

from ehr_release.core.files import sha256_bytes
from ehr_release.model.reports import AttackReport, UtilityReport, VerificationReport
from ehr_release.planning.plan import ReleasePlan
from ehr_release.registry import ReleaseFiles
from ehr_release.registry.warm_up import announce_compile
from ehr_release.release.verification import (
    anonymize_as_released,
    as_released,
    attack_release,
    verify_release,
    with_attack,
)
from ehr_release.storage import runs
from ehr_release.tasks.artifacts import md_table, md_text, stage_artifact
from ehr_release.tasks.aside import take_evaluation
from ehr_release.tasks.caching import release_stage_key
from ehr_release.tasks.logs import names, plural, since, size, stage_log
from ehr_release.tasks.naming import describe, stage_run_name
from ehr_release.tasks.redaction import redacted

#: What the utility artifact shows for a figure computed on the original data under ε-DP.
WITHHELD_UTILITY = "measured on the original data: on the dashboard and the certificate only"


# Keyed to the release id: a resumed run reuses its anonymization (and any privacy budget it
# spent) instead of drawing a second, different release from the same data.
@task(name="anonymize", task_run_name=stage_run_name("anonymize"),
      cache_key_fn=release_stage_key, persist_result=True)
@redacted
def anonymize_task(plan: ReleasePlan) -> ReleaseFiles:
    run_id, algorithm = plan.run_id, plan.algorithm
    announce_compile(algorithm, get_run_logger().info)  # in Prefect's log, if it compiles
    started = time.perf_counter()
    files = anonymize_as_released(plan.entry, plan.dataset, plan.stage_params(), plan.rng(),
                                  run_id)
    sizes = [(name, f"{len(data):,} bytes") for name, data in sorted(files.items())]
    stage_artifact("anonymize", run_id, f"Algorithm `{algorithm}`\n\n"
                   + md_table(sizes, ("release file", "size")))
    stage_log("anonymize", f"{describe(algorithm, plan.request.params)} wrote "
                           f"{plural(len(files), 'file')} ({names(sorted(files))}; "
                           f"{size(sum(len(d) for d in files.values()))}) in {since(started)}")
    return files


@task(name="pin-candidate", task_run_name="pin-candidate", retries=2,
      retry_delay_seconds=1, cache_policy=None, persist_result=False)
@redacted
def pin_candidate_task(run_id: str, files: ReleaseFiles) -> None:
    """Fix the hashes of this run's release; publish later refuses anything else."""
    runs.pin_candidate(run_id, {n: (sha256_bytes(d), len(d)) for n, d in files.items()})
    stage_log("pin-candidate", f"SHA-256 of {plural(len(files), 'release file')} pinned: "
                               "publishing refuses any other byte")


@task(name="verify", task_run_name=stage_run_name("verify"), persist_result=False,
      cache_policy=None)
@redacted
def verify_task(plan: ReleasePlan, files: ReleaseFiles) -> VerificationReport:
    """Re-check the guarantee with the independent verifier; record the verdict either way.

    On top of the algorithm's own requirements, every release is checked for source ids.
    """
    run_id = plan.run_id
    started = time.perf_counter()
    report = verify_release(plan.entry, files, plan.dataset, plan.stage_params(), run_id)
    runs.save_verification(run_id, report.stored().to_dict())
    stage_artifact("verification", run_id, verification_markdown(report))
    stage_log("verify", verdict_line(report) + f" in {since(started)}")
    return report


def verdict_line(report: VerificationReport) -> str:
    """``4 of 4 requirements hold (a, b, c and d)``, or which did not: names only."""
    shown = report.stored().requirements
    failed = [r.name for r in shown if not r.passed]
    held = f"{len(shown) - len(failed)} of {plural(len(shown), 'requirement')} hold"
    if not failed:
        return f"{held} ({names(r.name for r in shown)})"
    return f"{held}; NOT holding: {names(failed)} — nothing will be published"


def verification_markdown(report: VerificationReport) -> str:
    """The verification artifact: the verdict and the stored copy's table (Prefect keeps
    artifacts outside the run, so they hold no value of the data; see
    :meth:`~ehr_release.model.reports.VerificationReport.stored`)."""
    shown = report.stored().requirements
    verdict = "**verified**" if report.holds else "**NOT verified — nothing will be published**"
    table = md_table([(r.name, "PASS" if r.passed else "FAIL") for r in shown],
                     ("requirement", "result"))
    details = "\n".join(f"- **{md_text(r.name)}** — required: {md_text(r.required)}; "
                        f"measured: {md_text(r.measured)}" for r in shown)
    return f"{verdict}\n\n{table}\n\n{details}"


@task(name="attack", task_run_name=stage_run_name("attack"), persist_result=False,
      cache_policy=None)
@redacted
def attack_task(plan: ReleasePlan, files: ReleaseFiles, verification: VerificationReport
                ) -> tuple[VerificationReport, AttackReport]:
    """Run the model's adversary on the published bytes; its verdict joins the verification.

    The attack shares no code with the algorithm or the model checks, and reads every
    published field: a release the verifier passed can still fail here.
    """
    run_id = plan.run_id
    started = time.perf_counter()
    attack = attack_release(plan.entry, files, plan.dataset, plan.stage_params(), run_id)
    report = with_attack(verification, attack)
    runs.save_verification(run_id, report.stored().to_dict())
    stage_artifact("attack-audit", run_id, attack_markdown(attack))
    stage_log("attack audit", attack_line(attack) + f" in {since(started)}")
    return report, attack


def attack_line(attack: AttackReport) -> str:
    """The attack's verdict in one line, from its stored copy (figures only)."""
    shown = attack.stored()
    smallest = ("" if shown.smallest_candidate_set is None
                else f", smallest candidate set {shown.smallest_candidate_set:,} (required "
                     f"≥ {shown.threshold:,})")
    return (f"{'passed' if shown.passed else 'FAILED'} — {shown.attacker_model}; "
            f"{plural(shown.knowledge_sets_tried, 'knowledge set')} tried "
            f"({'every one' if shown.exhaustive else 'sampled'}){smallest}")


def attack_markdown(attack: AttackReport) -> str:
    """The attack artifact, from the stored copy (:meth:`AttackReport.stored`)."""
    shown = attack.stored()
    tried = f"{shown.knowledge_sets_tried:,} ({'every one' if shown.exhaustive else 'sampled'})"
    smallest = ("–" if shown.smallest_candidate_set is None
                else f"{shown.smallest_candidate_set:,} (required ≥ {shown.threshold:,})")
    return (("**passed**" if shown.passed else "**FAILED — nothing will be published**")
            + "\n\n" + md_table([
                ("attacker model", shown.attacker_model), ("knowledge sets", tried),
                ("smallest candidate set", smallest), ("measured", shown.measured or "–"),
                ("seconds", f"{shown.seconds:.2f}")], ("attack audit", "value")))


@task(name="evaluate", task_run_name=stage_run_name("evaluate"), persist_result=False,
      cache_policy=None)
@redacted
def evaluate_task(plan: ReleasePlan, files: ReleaseFiles) -> UtilityReport:
    """Measure utility, or take the report computed aside for this run
    (:mod:`ehr_release.tasks.aside`); record it either way."""
    entry, run_id = plan.entry, plan.run_id
    started = time.perf_counter()
    report = take_evaluation(run_id)
    where = "taken from the second process"
    if report is None:
        where = "measured here"
        report = entry.evaluate(files, as_released(entry, plan.dataset, run_id),
                                plan.stage_params(), plan.rng())
    runs.save_utility(run_id, report.to_dict())
    stage_artifact("utility", run_id, utility_markdown(report, entry.differentially_private))
    stage_log("evaluate", f"{plural(len(report.metrics), 'utility measure')} {where} in "
                          f"{since(started)} (values on the certificate)")
    return report


def utility_markdown(report: UtilityReport, differentially_private: bool) -> str:
    """The utility artifact: each metric and its value, or under ε-DP its name only.

    Prefect keeps artifacts outside the run. A differentially private release covers only
    itself, and its utility figures are computed on the original records (true counts, test
    records), so like the verifier's measurements on the original
    (:attr:`~ehr_release.model.reports.Requirement.on_original`) they stay in the run: the
    dashboard and the certificate show them.
    """
    if not differentially_private:
        return md_table([(k, f"{v:.6g}") for k, v in report.metrics.items()],
                        ("metric", "value"))
    return md_table([(k, WITHHELD_UTILITY) for k in report.metrics], ("metric", "value"))
