"""``compare_flow``: several anonymizations of one dataset, verified and measured side by side.

Each candidate (algorithm × grid point) is one Prefect task submitted to the flow's task
runner, so candidates run in parallel. Candidates are never published and never become
release runs: the flow writes only the comparison report (JSON for machines, HTML + PDF for
people) and audit events: one for the comparison, and one per ε-DP candidate drawn, which
spends the extract's ε (:mod:`ehr_release.storage.budget`; a comparison whose DP candidates
the site's total cannot pay for is refused before any draw). A steward then requests a
release from one row of it.

Each finished candidate is logged (INFO, to the Prefect UI) and handed to the listeners
registered with :func:`candidate_listener` — the CLI's progress display — as it finishes,
not when the last one does.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.futures import as_completed

from ehr_release.comparison.compare import (
    Candidate,
    Outcome,
    loss_of,
    parse_requirement,
    plan,
    recommend,
)
from ehr_release.comparison.comparison_file import load_comparison_row
from ehr_release.comparison.comparison_report import (
    ComparisonContext,
    render_comparison_html,
    render_comparison_pdf,
)
from ehr_release.core.canonical import canonical_json
from ehr_release.core.errors import EhrReleaseError, stored_error, stored_message
from ehr_release.core.files import fsync_dir, write_durably
from ehr_release.core.randomness import check_random_state
from ehr_release.flows.tagging import tag_flow_run
from ehr_release.history.linkage import link_patients
from ehr_release.model.dataset import Dataset
from ehr_release.parameters.comparators import STORE, ComparatorReleases, release_key
from ehr_release.parameters.prepared import PREPARED
from ehr_release.planning.intake import load_comparison_dataset
from ehr_release.planning.request import ComparisonRequest
from ehr_release.registry import get as get_algorithm
from ehr_release.release.verification import anonymize_as_released, as_released, verify_and_attack
from ehr_release.storage.actions import AuditAction
from ehr_release.storage.audit import record_event
from ehr_release.storage.budget import (
    EpsilonBudgetExhausted,
    dp_algorithm_names,
    record_comparison_draw,
    refuse_comparison_beyond_total,
)
from ehr_release.storage.destinations import releases_folder
from ehr_release.tasks.naming import candidate_run_name, comparison_tags
from ehr_release.tasks.redaction import redacted

__all__ = ["candidate_listener", "candidate_task", "compare_flow", "load_comparison_row"]

#: Called with (outcome, done, total) as each candidate finishes (see candidate_listener).
CandidateListener = Callable[[Outcome, int, int], None]
_LISTENERS: list[CandidateListener] = []
_LISTENERS_LOCK = threading.Lock()
#: What Prefect's log line shows instead of an ε-DP row's loss (see :func:`_announce`).
WITHHELD_LOSS = "(measured on the true data: in the report only)"


@contextmanager
def candidate_listener(listener: CandidateListener) -> Iterator[None]:
    """Call ``listener`` for each candidate a comparison in this process finishes.

    A flow parameter cannot carry a callback (Prefect records its parameters), so the
    listener is registered beside the flow for as long as the ``with`` block lasts.
    """
    with _LISTENERS_LOCK:
        _LISTENERS.append(listener)
    try:
        yield
    finally:
        with _LISTENERS_LOCK:
            _LISTENERS.remove(listener)


def _announce(outcome: Outcome, done: int, total: int) -> None:
    """Log one finished candidate to Prefect and tell the listeners (labels and losses only).

    An ε-DP row's loss is measured on the true data, which ε does not cover: Prefect keeps
    its log outside the owner-only report, so the line names the metric and withholds the
    value (as the release flow's utility artifact does); the listeners — the terminal — get
    the whole outcome.
    """
    verdict = ("verified" if outcome.verified
               else "failed to run" if outcome.error else "not verified")
    loss = "" if outcome.loss is None else f", {outcome.loss_metric} {outcome.loss:.4g}"
    if outcome.loss is not None and outcome.candidate.differentially_private:
        loss = f", {outcome.loss_metric} {WITHHELD_LOSS}"
    get_run_logger().info("candidate %d/%d, row %d %s: %s%s", done, total,
                          outcome.candidate.index, outcome.candidate.label, verdict, loss)
    with _LISTENERS_LOCK:
        listeners = list(_LISTENERS)
    for listener in listeners:
        listener(outcome, done, total)


#: Parameters by which an algorithm's evaluation runs other algorithms for comparison
#: (ArtUC's RmR and Baseline): inside a comparison the other candidates are that comparison,
#: so they are off unless the request sets them (measured: the ArtUC candidates of a
#: 10,000-patient comparison spent most of their time re-running RmR and Baseline). When a
#: request sets them, each comparator release is made once for the whole comparison and
#: candidates' own releases serve as comparators (:mod:`ehr_release.parameters.comparators`).
SELF_COMPARISON_OFF = {"compare": "false"}


def within_comparison(entry: Any, params: dict[str, str]) -> dict[str, str]:
    """A candidate's parameters as its comparison runs them (see SELF_COMPARISON_OFF); the
    row keeps the parameters as given, so a release made from it evaluates as usual."""
    accepted = {p.name for p in entry.params}
    extra = {k: v for k, v in SELF_COMPARISON_OFF.items() if k in accepted and k not in params}
    return {**extra, **params}


# Patient data passes through but is never cached or persisted by Prefect.
@task(name="compare-candidate", task_run_name=candidate_run_name, persist_result=False,
      cache_policy=None)
@redacted
def candidate_task(candidate: Candidate, dataset: Dataset, metric: str | None,
                   comparison_id: str, comparators: ComparatorReleases | None = None
                   ) -> Outcome:
    """Anonymize, verify and (if verified) evaluate one candidate; errors become outcomes.

    The candidate goes through the release's own path (:mod:`ehr_release.release.verification`):
    pseudonymized as it would be published, then closed world, the model's verifier, the
    source-id check and the attack audit — a candidate a release would fail is not
    recommended. An ε-DP candidate's draw is counted on its extract's ε account as soon as
    it exists (:func:`~ehr_release.storage.budget.record_comparison_draw`). ``comparators``
    is the comparison's store of releases an evaluation compares with
    (:mod:`ehr_release.parameters.comparators`): this candidate's release is made through it (once,
    whoever asks first), and its evaluation takes the others from it.
    """
    entry = get_algorithm(candidate.algorithm)
    loss_metric = metric or entry.headline_loss
    try:
        parsed = entry.parse(within_comparison(entry, candidate.params))
        ready = entry.prepare(parsed) if entry.prepare is not None else {}
        if comparators is not None:
            ready = {**ready, STORE: comparators}
        if ready:  # the candidate's configuration or population, once; the shared store
            parsed = {**parsed, PREPARED: ready}
        seed = parsed.get("seed")
        release_id = f"{comparison_id}-{candidate.index}"

        def anonymize() -> dict[str, bytes]:
            return anonymize_as_released(entry, dataset, parsed, check_random_state(seed),
                                         release_id)

        if comparators is not None and entry.id_file is None:
            # Made once: another candidate's evaluation may already have made (or be making)
            # this very release as its comparator, and may ask for it later.
            files = comparators.get(release_key(entry.name, entry.params, parsed), dataset,
                                    anonymize)
        else:  # pseudonymized per candidate: never shared
            files = anonymize()
        if candidate.differentially_private:  # drawn: counted now, whatever follows
            record_comparison_draw(comparison_id, dataset.fingerprint(), candidate.index,
                                   candidate.algorithm, candidate.params)
        verification, _ = verify_and_attack(entry, files, dataset, parsed, release_id)
        if not verification.holds:
            # Names only: what was measured on a failed release may quote what failed.
            return Outcome(candidate, False, loss_metric, None,
                           failures=[r.name for r in verification.failures])
        utility = entry.evaluate(files, as_released(entry, dataset, release_id), parsed,
                                 check_random_state(seed))
    except EhrReleaseError as exc:
        return Outcome(candidate, False, loss_metric, None, error=stored_message(exc))
    return Outcome(candidate, True, loss_metric, loss_of(utility.metrics, loss_metric),
                   metrics=dict(utility.metrics))


@flow(name="compare_flow", flow_run_name="compare-{request.comparison_id}", persist_result=False)
@redacted
def compare_flow(request: ComparisonRequest) -> dict[str, Any]:
    """Run every candidate, recommend one, write the report; returns the report's JSON."""
    tag_flow_run(comparison_tags(request.comparison_id, request.algorithms, request.source))
    requirements = [parse_requirement(r) for r in request.requirements]
    candidates = plan([get_algorithm(a) for a in request.algorithms], request.params,
                      request.grid)
    dataset = load_comparison_dataset(request)
    fingerprint = dataset.fingerprint()
    _refuse_beyond_total(request, candidates, fingerprint, dataset)  # before the first draw
    comparators = ComparatorReleases(dataset)
    futures = [candidate_task.submit(c, dataset, request.metric, request.comparison_id,
                                     comparators)
               for c in candidates]
    for done, future in enumerate(as_completed(futures), start=1):
        _announce(future.result(), done, len(futures))
    outcomes = [f.result() for f in futures]
    best, reasons = recommend(outcomes, requirements, request.max_loss)
    report = {
        "comparison_id": request.comparison_id, "requester": request.requester,
        "dataset_fingerprint": fingerprint, "dataset_rows": dataset.n_patients,
        "requirements": request.requirements, "max_loss": request.max_loss,
        "rows": [o.to_dict() for o in outcomes],
        "recommended_row": best.candidate.index if best else None, "reasons": reasons}
    ctx = ComparisonContext(
        comparison_id=request.comparison_id, requester=request.requester,
        created_at=datetime.now(UTC), dataset_source=dataset.source,
        dataset_rows=dataset.n_patients, dataset_fingerprint=fingerprint,
        axis=next(iter(request.grid), None), outcomes=outcomes, recommended=best,
        reasons=reasons, requirements=requirements, max_loss=request.max_loss)
    _write_report(request, report, ctx)
    record_event(actor=request.requester, action=AuditAction.COMPARISON_COMPLETED,
                 payload={"comparison": request.comparison_id, "dataset": fingerprint,
                          "candidates": len(outcomes),
                          "recommended": best.candidate.label if best else None})
    return report


def _refuse_beyond_total(request: ComparisonRequest, candidates: list[Candidate],
                         fingerprint: str, dataset: Dataset) -> None:
    """Refuse the whole comparison, before anything is drawn, if its DP candidates together
    would take the extract beyond the site's total ε (:mod:`ehr_release.storage.budget`).

    Each DP candidate drawn counts on the extract's account (its utility is shown, measured
    on the true data). The refusal is an audit event of its own, as a refused run's is;
    otherwise their ε is reserved before the first draw (``epsilon.reserved``).
    """
    try:
        dp = [c.params for c in candidates if c.differentially_private]
        refuse_comparison_beyond_total(
            request.comparison_id, fingerprint, dp, dp_algorithm_names(),
            links=link_patients(dataset, request.source) if dp else None,
            source=request.source)
    except EpsilonBudgetExhausted as exc:
        record_event(actor=request.requester, action=AuditAction.COMPARISON_REFUSED,
                     payload={"comparison": request.comparison_id, "dataset": fingerprint,
                              "error": stored_error(exc)})
        raise


def _write_report(request: ComparisonRequest, report: dict[str, Any],
                  ctx: ComparisonContext) -> None:
    """All three files appear together or not at all (staged, then one rename), under the
    releases root only (the folder checked as a release's is: no symlink led elsewhere).

    Owner-only (folder 0700, files 0600), like the certificate: the report lands under the
    releases root, next to what is published, but its utilities are measured on the
    original data (DiffGen's rows too, which ε does not cover).
    """
    final = releases_folder(request.out_dir, "comparisons") / request.folder.name
    staging = final.with_name(f".staging-{final.name}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    staging.mkdir(mode=0o700)
    staging.chmod(0o700)  # mkdir's mode is masked by the umask
    try:
        write_durably(staging / "comparison.json",
                      (canonical_json(report) + "\n").encode(), private=True)
        write_durably(staging / "comparison.html", render_comparison_html(ctx).encode(),
                      private=True)
        write_durably(staging / "comparison.pdf", render_comparison_pdf(ctx), private=True)
        os.replace(staging, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
