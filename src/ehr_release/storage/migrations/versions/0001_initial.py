"""The initial schema: the tables ``create_all`` made before migrations existed.

Revision ID: 0001
Revises:
Create Date: 2026-11-28

Adoptive: a database made by ``create_all`` before this revision has some or all of these
tables and no ``alembic_version``; each table is created only if it is missing, so such a
database is brought to this revision (and stamped) without touching its data. Every later
revision is an ordinary one (see ``../README.md``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

S = sa.String


def _table(name: str, *columns: sa.SchemaItem, index: tuple[str, ...] = (),
           unique_index: tuple[str, ...] = ()) -> None:
    """Create table ``name`` with an index per column named in ``index``/``unique_index``,
    unless the table exists already (a database made by ``create_all``)."""
    if sa.inspect(op.get_bind()).has_table(name):
        return
    op.create_table(name, *columns)
    for column in index:
        op.create_index(op.f(f"ix_{name}_{column}"), name, [column], unique=False)
    for column in unique_index:
        op.create_index(op.f(f"ix_{name}_{column}"), name, [column], unique=True)


def upgrade() -> None:
    _table("audit_events",
           sa.Column("seq", sa.Integer(), nullable=False),
           sa.Column("created_at", S(), nullable=False),
           sa.Column("actor", S(), nullable=False),
           sa.Column("action", S(), nullable=False),
           sa.Column("run_id", S(), nullable=True),
           sa.Column("payload_json", S(), nullable=False),
           sa.Column("prev_hash", S(length=64), nullable=False),
           sa.Column("hash", S(length=64), nullable=False),
           sa.PrimaryKeyConstraint("seq"),
           sa.UniqueConstraint("prev_hash", name="uq_audit_prev_hash"),
           index=("run_id",))
    _table("datasets",
           sa.Column("id", sa.Integer(), nullable=False),
           sa.Column("fingerprint", S(length=64), nullable=False),
           sa.Column("rows", sa.Integer(), nullable=False),
           sa.Column("codes", sa.Integer(), nullable=False),
           sa.Column("columns_json", S(), nullable=False),
           sa.Column("source", S(), nullable=False),
           sa.Column("created_at", S(), nullable=False),
           sa.PrimaryKeyConstraint("id"),
           index=("fingerprint",))
    _table("extract_links",
           sa.Column("subject", S(length=64), nullable=False),
           sa.Column("kind", S(length=20), nullable=False),
           sa.Column("source", S(length=120), nullable=False),
           sa.Column("patients", sa.Integer(), nullable=False),
           sa.Column("id_hashes", sa.LargeBinary(), nullable=False),
           sa.Column("content_hashes", sa.LargeBinary(), nullable=False),
           sa.Column("created_at", S(), nullable=False),
           sa.PrimaryKeyConstraint("subject"),
           index=("source",))
    _table("pending_releases",
           sa.Column("run_id", S(length=64), nullable=False),
           sa.Column("candidate_dir", S(), nullable=False),
           sa.Column("verification_json", S(), nullable=False),
           sa.Column("utility_json", S(), nullable=False),
           sa.Column("outcome_json", S(), nullable=False),
           sa.Column("data_use_json", S(), nullable=False),
           sa.Column("expires_at", S(), nullable=False),
           sa.Column("created_at", S(), nullable=False),
           sa.PrimaryKeyConstraint("run_id"))
    _table("run_leases",
           sa.Column("run_id", S(length=64), nullable=False),
           sa.Column("holder", S(), nullable=False),
           sa.Column("host", S(), nullable=False),
           sa.Column("pid", sa.Integer(), nullable=False),
           sa.Column("renewed_at", S(), nullable=False),
           sa.PrimaryKeyConstraint("run_id"))
    _table("signin_throttle",
           sa.Column("key_sha256", S(length=64), nullable=False),
           sa.Column("scope", S(length=10), nullable=False),
           sa.Column("failures", sa.Integer(), nullable=False),
           sa.Column("window_started_at", S(), nullable=False),
           sa.Column("locked_until", S(), nullable=True),
           sa.Column("updated_at", S(), nullable=False),
           sa.PrimaryKeyConstraint("key_sha256"))
    _table("users",
           sa.Column("id", sa.Integer(), nullable=False),
           sa.Column("name", S(length=120), nullable=False),
           sa.Column("role", S(length=20), nullable=False),
           sa.Column("credential_hash", S(), nullable=False),
           sa.Column("created_at", S(), nullable=False),
           sa.Column("disabled", sa.Boolean(), nullable=False),
           sa.PrimaryKeyConstraint("id"),
           unique_index=("name",))
    _table("release_runs",
           sa.Column("id", S(length=64), nullable=False),
           sa.Column("dataset_id", sa.Integer(), nullable=False),
           sa.Column("requester", S(), nullable=False),
           sa.Column("algorithm", S(), nullable=False),
           sa.Column("parameters_json", S(), nullable=False),
           sa.Column("status", S(), nullable=False),
           sa.Column("out_dir", S(), nullable=False),
           sa.Column("flow_run_id", S(), nullable=True),
           sa.Column("error", S(), nullable=True),
           sa.Column("created_at", S(), nullable=False),
           sa.Column("updated_at", S(), nullable=False),
           sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"]),
           sa.PrimaryKeyConstraint("id"),
           index=("status",))
    _table("user_sessions",
           sa.Column("token_sha256", S(length=64), nullable=False),
           sa.Column("user_id", sa.Integer(), nullable=False),
           sa.Column("csrf_token", S(length=64), nullable=False),
           sa.Column("created_at", S(), nullable=False),
           sa.Column("expires_at", S(), nullable=False),
           sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
           sa.PrimaryKeyConstraint("token_sha256"),
           index=("user_id",))
    _table("approvals",
           sa.Column("id", sa.Integer(), nullable=False),
           sa.Column("run_id", S(), nullable=False),
           sa.Column("reviewer", S(), nullable=False),
           sa.Column("decision", S(), nullable=False),
           sa.Column("reason", S(), nullable=False),
           sa.Column("decided_at", S(), nullable=False),
           sa.ForeignKeyConstraint(["run_id"], ["release_runs.id"]),
           sa.PrimaryKeyConstraint("id"),
           sa.UniqueConstraint("run_id", name="uq_approvals_run"))
    _table("artifacts",
           sa.Column("id", sa.Integer(), nullable=False),
           sa.Column("run_id", S(), nullable=False),
           sa.Column("created_at", S(), nullable=False),
           sa.Column("kind", S(), nullable=False),
           sa.Column("path", S(), nullable=False),
           sa.Column("sha256", S(length=64), nullable=False),
           sa.Column("size", sa.Integer(), nullable=False),
           sa.ForeignKeyConstraint(["run_id"], ["release_runs.id"]),
           sa.PrimaryKeyConstraint("id"),
           index=("run_id",))
    _table("utility_results",
           sa.Column("id", sa.Integer(), nullable=False),
           sa.Column("run_id", S(), nullable=False),
           sa.Column("created_at", S(), nullable=False),
           sa.Column("report_json", S(), nullable=False),
           sa.Column("metrics_json", S(), nullable=False),
           sa.ForeignKeyConstraint(["run_id"], ["release_runs.id"]),
           sa.PrimaryKeyConstraint("id"),
           index=("run_id",))
    _table("verification_results",
           sa.Column("id", sa.Integer(), nullable=False),
           sa.Column("run_id", S(), nullable=False),
           sa.Column("created_at", S(), nullable=False),
           sa.Column("report_json", S(), nullable=False),
           sa.Column("holds", sa.Boolean(), nullable=False),
           sa.ForeignKeyConstraint(["run_id"], ["release_runs.id"]),
           sa.PrimaryKeyConstraint("id"),
           index=("run_id",))


def downgrade() -> None:
    for name in ("verification_results", "utility_results", "artifacts", "approvals",
                 "user_sessions", "release_runs", "users", "signin_throttle", "run_leases",
                 "pending_releases", "extract_links", "datasets", "audit_events"):
        op.drop_table(name)
