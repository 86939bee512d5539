"""The history stages: keep the extract's patient hashes, then judge the release with its
history. Thin Prefect tasks around :mod:`ehr_release.history` (tested without Prefect)."""

from __future__ import annotations

import time

from prefect import task

from ehr_release.history.checks import HISTORY, HistoryVerdict, check_history
from ehr_release.history.linkage import PatientLinks, link_patients
from ehr_release.model.reports import VerificationReport
from ehr_release.planning.plan import ReleasePlan
from ehr_release.registry import ReleaseFiles
from ehr_release.storage import links as stored_links
from ehr_release.storage import runs
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.tasks.artifacts import md_table, md_text, stage_artifact
from ehr_release.tasks.logs import plural, since, stage_log
from ehr_release.tasks.naming import stage_run_name
from ehr_release.tasks.redaction import redacted
from ehr_release.tasks.retry import is_transient
from ehr_release.tasks.status import FLOW_ACTOR


@task(name="link-extract", task_run_name="link-extract[source {plan.request.source}]",
      retries=2, retry_delay_seconds=1, retry_condition_fn=is_transient,
      persist_result=False, cache_policy=None)
@redacted
def link_extract_task(plan: ReleasePlan) -> PatientLinks:
    """Keep the extract's keyed patient hashes before anything is drawn from it, so every
    later account and history check sees this run (a resumed run keeps its first row)."""
    source = plan.request.source
    links = link_patients(plan.dataset, source)
    stored_links.save_links(plan.run_id, stored_links.RUN, source, links)
    stage_log("link-extract", f"keyed hashes of {plural(links.patients, 'patient')} kept for "
                              f"source {source!r} (for later accounts and history checks)")
    return links


@task(name="history", task_run_name=stage_run_name("history"), persist_result=False,
      cache_policy=None)
@redacted
def history_task(plan: ReleasePlan, files: ReleaseFiles, links: PatientLinks,
                 verification: VerificationReport) -> VerificationReport:
    """Judge the release with every earlier release of overlapping patients; its verdict
    joins the verification as the ``release history`` requirement (DP runs: unchanged)."""
    started = time.perf_counter()
    verdict = check_history(plan.run_id, plan.algorithm, plan.params, files, links)
    if verdict is None:
        stage_log("history", "not judged here (a differentially private release: its ε is "
                             "accounted instead)")
        return verification
    kept = [r for r in verification.requirements if r.name != HISTORY]
    report = VerificationReport(verification.algorithm, [*kept, verdict.requirement()])
    runs.save_verification(plan.run_id, report.stored().to_dict())
    record_event(actor=FLOW_ACTOR, action=AuditAction.HISTORY_CHECKED, run_id=plan.run_id,
                 payload={"earlier": [e.run_id for e in verdict.earlier],
                          "differencing": [e.run_id for e in verdict.differencing],
                          "weaker_than": [e.run_id for e, _ in verdict.weaker],
                          "weaker_allowed": verdict.policy.allowed and bool(verdict.weaker),
                          "holds": verdict.holds})
    stage_artifact("history", plan.run_id, history_markdown(verdict))
    stage_log("history", f"{'holds' if verdict.holds else 'does NOT hold'} with "
                         f"{plural(len(verdict.earlier), 'earlier release')} of overlapping "
                         f"patients ({len(verdict.differencing)} differencing, "
                         f"{len(verdict.weaker)} weaker) in {since(started)}")
    return report


def history_markdown(verdict: HistoryVerdict) -> str:
    """The history artifact: overlaps in a narrow table, each promise in a list below."""
    table = md_table(
        [(e.run_id, f"{e.overlap.shared:,}", f"{e.overlap.only_current:,}",
          f"{e.overlap.only_earlier:,}") for e in verdict.earlier]
        or [("–", "0", "–", "–")],
        ("earlier release", "shared", "only here", "only there"))
    promises = "\n".join(f"- `{e.run_id}` ({md_text(e.algorithm)}): "
                         f"{md_text(e.strength.words())}" for e in verdict.earlier)
    return table + (f"\n\n{promises}" if promises else "")

