"""Database tables (SQLModel). One module, one job: the shape of what we keep.

Timestamps are stored as ISO-8601 UTC strings: the audit chain hashes them, and a string
round-trips identically through SQLite and PostgreSQL where datetimes may not.
JSON payloads are stored as canonical text for the same reason.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlmodel import Field, SQLModel, UniqueConstraint


def utc_now() -> str:
    """Current UTC time, ISO-8601 with microseconds and explicit offset."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


class DatasetRecord(SQLModel, table=True):
    """An ingested extract, known by the SHA-256 of its canonical form (never its content)."""

    __tablename__ = "datasets"
    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(index=True, max_length=64)
    rows: int
    codes: int
    columns_json: str
    source: str
    created_at: str = Field(default_factory=utc_now)


class ReleaseRun(SQLModel, table=True):
    """One release request and where it stands in the state machine (see ``runs.py``)."""

    __tablename__ = "release_runs"
    id: str = Field(primary_key=True, max_length=64)
    dataset_id: int = Field(foreign_key="datasets.id")
    requester: str
    algorithm: str
    parameters_json: str
    status: str = Field(index=True)
    out_dir: str
    flow_run_id: str | None = None
    error: str | None = None
    created_at: str = Field(default_factory=utc_now)
    updated_at: str = Field(default_factory=utc_now)


class RunRecordBase(SQLModel):
    """The fields every per-run result row shares: its own id, its run, when it was written.

    Not a table: each result table inherits these columns (with its own index and foreign
    key) and adds what is particular to it.
    """

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="release_runs.id", index=True)
    created_at: str = Field(default_factory=utc_now)


class RunReportBase(RunRecordBase):
    """A stage's whole report, as canonical JSON (read back by ``latest_verification`` /
    ``latest_utility``)."""

    report_json: str


class VerificationResult(RunReportBase, table=True):
    """The verifier's report of one attempt; ``holds`` is its verdict."""

    __tablename__ = "verification_results"
    holds: bool


class UtilityResult(RunReportBase, table=True):
    """The utility report of one attempt, its headline metrics also kept apart."""

    __tablename__ = "utility_results"
    metrics_json: str


class Approval(SQLModel, table=True):
    """The reviewer's decision. One per run: the unique constraint makes a race lose cleanly."""

    __tablename__ = "approvals"
    __table_args__ = (UniqueConstraint("run_id", name="uq_approvals_run"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="release_runs.id")
    reviewer: str
    decision: str
    reason: str
    decided_at: str = Field(default_factory=utc_now)


class ArtifactRecord(RunRecordBase, table=True):
    """A file the system produced for a run, with the hash it had when recorded."""

    __tablename__ = "artifacts"
    kind: str
    path: str
    sha256: str = Field(max_length=64)
    size: int


class AuditEvent(SQLModel, table=True):
    """Append-only, hash-chained event. ``prev_hash`` is unique, so the chain cannot fork."""

    __tablename__ = "audit_events"
    __table_args__ = (UniqueConstraint("prev_hash", name="uq_audit_prev_hash"),)
    seq: int = Field(primary_key=True)
    created_at: str
    actor: str
    action: str
    run_id: str | None = Field(default=None, index=True)
    payload_json: str
    prev_hash: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class User(SQLModel, table=True):
    """A person who signs in to the dashboard, with one role.

    Roles: ``steward`` (requests runs), ``reviewer`` (decides them), ``auditor`` (reads audit
    trails). Only an Argon2 hash of the credential is kept.
    """

    __tablename__ = "users"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True, max_length=120)
    role: str = Field(max_length=20)
    credential_hash: str
    created_at: str = Field(default_factory=utc_now)
    disabled: bool = False


class UserSession(SQLModel, table=True):
    """A signed-in browser: the cookie holds a random token, the table only its SHA-256.

    ``csrf_token`` is the synchronizer token every form of this session must send back.
    """

    __tablename__ = "user_sessions"
    token_sha256: str = Field(primary_key=True, max_length=64)
    user_id: int = Field(foreign_key="users.id", index=True)
    csrf_token: str = Field(max_length=64)
    created_at: str = Field(default_factory=utc_now)
    expires_at: str


class SignInThrottle(SQLModel, table=True):
    """Recent sign-in failures of one user name or one client, and its lockout if any.

    Kept in the database (not in memory) so a restart of the dashboard does not hand an
    attacker a fresh set of guesses. ``key_sha256`` is the SHA-256 of scope and subject: a
    name typed at the sign-in form (perhaps a mistyped credential) is never stored in clear.
    """

    __tablename__ = "signin_throttle"
    key_sha256: str = Field(primary_key=True, max_length=64)
    scope: str = Field(max_length=10)
    failures: int = 0
    window_started_at: str = Field(default_factory=utc_now)
    locked_until: str | None = None
    updated_at: str = Field(default_factory=utc_now)


class ExtractLinks(SQLModel, table=True):
    """The keyed per-patient hashes of one run's (or comparison's) extract.

    Kept for every release so later extracts of the same patients are found whatever their
    ids or file (see :mod:`ehr_release.history.linkage`). Two blobs of 16-byte HMACs, row
    ``i`` of both the same patient; no value of the data and no key is stored.
    """

    __tablename__ = "extract_links"
    subject: str = Field(primary_key=True, max_length=64)
    kind: str = Field(max_length=20)
    source: str = Field(index=True, max_length=120)
    patients: int
    id_hashes: bytes
    content_hashes: bytes
    created_at: str = Field(default_factory=utc_now)


class PendingRelease(SQLModel, table=True):
    """A certified run's publication bundle (everything but the files, which are on disk);
    read and written by :mod:`ehr_release.storage.pending`."""

    __tablename__ = "pending_releases"
    run_id: str = Field(primary_key=True, max_length=64)
    candidate_dir: str
    verification_json: str
    utility_json: str
    outcome_json: str
    data_use_json: str
    expires_at: str
    created_at: str = Field(default_factory=utc_now)


class RunLease(SQLModel, table=True):
    """Proof of life of the process working on a run (no foreign key: it may precede the run)."""

    __tablename__ = "run_leases"
    run_id: str = Field(primary_key=True, max_length=64)
    holder: str
    host: str
    pid: int
    renewed_at: str
