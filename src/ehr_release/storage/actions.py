"""The names of audit events and of reviewer decisions, each written once.

Why enums: an audit event's ``action`` is part of what the chain authenticates, and readers
(``audit verify``, the dashboard, integrity checks) match on it. A name typed by hand at
each call site could drift — one misspelt ``"run.aproved"`` would be stored for ever and
silently missed by every reader. Both are :class:`~enum.StrEnum`, so the stored text is the
member's value, unchanged from when these were plain strings, and existing string
comparisons keep working.
"""

from __future__ import annotations

from enum import StrEnum


class AuditAction(StrEnum):
    """Every kind of audit event the system writes (``audit_events.action``)."""

    # a run's life: created, resumed, and each status it moves to (``run.<status>``)
    RUN_REQUESTED = "run.requested"
    RUN_RESUMED = "run.resumed"
    RUN_ANONYMIZED = "run.anonymized"
    RUN_VERIFIED = "run.verified"
    RUN_EVALUATED = "run.evaluated"
    RUN_CERTIFIED = "run.certified"
    RUN_AWAITING_APPROVAL = "run.awaiting_approval"
    RUN_APPROVED = "run.approved"
    RUN_REJECTED = "run.rejected"
    RUN_PUBLISHED = "run.published"
    RUN_FAILED = "run.failed"
    # refusals and other events of the pipeline
    INGEST_REJECTED = "ingest.rejected"
    APPROVAL_REFUSED = "approval.refused"
    PUBLISH_ORPHAN_REMOVED = "publish.orphan_removed"
    PUBLISH_REFUSED = "publish.refused"
    TASK_RETRYING = "task.retrying"
    COMPARISON_COMPLETED = "comparison.completed"
    COMPARISON_DRAWN = "comparison.drawn"
    COMPARISON_REFUSED = "comparison.refused"
    EPSILON_RESERVED = "epsilon.reserved"
    EPSILON_RELEASED = "epsilon.released"
    HISTORY_CHECKED = "history.checked"
    # people: accounts, sign-ins, the dashboard
    USER_ADDED = "user.added"
    AUTH_SIGNED_IN = "auth.signed_in"
    AUTH_REFUSED = "auth.refused"
    AUTH_LOCKED_OUT = "auth.locked_out"
    DASHBOARD_CSRF_REFUSED = "dashboard.csrf_refused"
    CERTIFICATE_DOWNLOADED = "certificate.downloaded"
    DATASHEET_DOWNLOADED = "datasheet.downloaded"
    RELEASE_ROWS_VIEWED = "release.rows_viewed"
    # the site's history policy: sources, the ε total, weaker re-releases
    SOURCE_REGISTERED = "source.registered"
    SITE_EPSILON_TOTAL_SET = "site.epsilon_total_set"
    SITE_WEAKER_POLICY_SET = "site.weaker_policy_set"
    # settings a decision depends on: the releases root, required data-use terms
    SITE_SETTING_SET = "site.setting_set"
    # the chain itself
    AUDIT_KEY_ROTATED = "audit.key_rotated"
    # the site: made once, as a test site or a normal one (:mod:`ehr_release.storage.site`)
    SITE_CREATED = "site.created"
    # a user's role changed (roles are read from the chain: storage/chained.py)
    USER_ROLE_CHANGED = "user.role_changed"
    # publishing an approved run failed; the run stays approved and can be retried
    PUBLISH_FAILED = "publish.failed"


def status_action(status: str) -> AuditAction:
    """The event a run's move to ``status`` writes (``run.<status>``).

    Raises
    ------
    ValueError
        ``status`` has no event (every run status has one; a test holds them in step).
    """
    return AuditAction(f"run.{status}")


def download_action(what: str) -> AuditAction:
    """The event a download of the run's ``what`` document writes (``<what>.downloaded``).

    Raises
    ------
    ValueError
        No document of that name is downloadable.
    """
    return AuditAction(f"{what}.downloaded")


#: Seconds a reviewer has to decide before the run is rejected, unless the request says
# : otherwise (here, not in :mod:`ehr_release.planning.request`, so the CLI reads it without
# pydantic).
DEFAULT_APPROVAL_TIMEOUT_S = 7 * 24 * 3600


class Decision(StrEnum):
    """A reviewer's decision on a run (``approvals.decision``)."""

    APPROVE = "approve"
    REJECT = "reject"
