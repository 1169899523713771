"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 16:34:11.718755
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "wfj_cluster_flags",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "wfj_concurrency_limits",
        sa.Column("kind", sa.SmallInteger(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "value"),
    )
    op.create_table(
        "wfj_job_attempts",
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Text(), nullable=True),
        sa.Column("started_at", sa.BigInteger(), nullable=True),
        sa.Column("ended_at", sa.BigInteger(), nullable=True),
        sa.Column("outcome", sa.SmallInteger(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_kind", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("job_id", "number"),
    )
    op.create_table(
        "wfj_jobs",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("job_type", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("definition_id", sa.Text(), server_default="", nullable=False),
        sa.Column("definition_version", sa.Integer(), server_default="0", nullable=False),
        sa.Column("instance_id", sa.Text(), server_default="", nullable=False),
        sa.Column("activity_id", sa.Text(), server_default="", nullable=False),
        sa.Column("activity_node_id", sa.Text(), server_default="", nullable=False),
        sa.Column("bookmark_id", sa.Text(), server_default="", nullable=False),
        sa.Column("correlation_id", sa.Text(), server_default="", nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("content_type", sa.Text(), server_default="", nullable=False),
        sa.Column("category", sa.SmallInteger(), server_default="0", nullable=False),
        sa.Column("priority", sa.Integer(), server_default="0", nullable=False),
        sa.Column("status", sa.SmallInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("retry_policy", sa.Text(), nullable=True),
        sa.Column("execution_timeout_ms", sa.BigInteger(), nullable=True),
        sa.Column("heartbeat_timeout_ms", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("due_at", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=True),
        sa.Column("finished_at", sa.BigInteger(), nullable=True),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_token", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_kind", sa.Text(), nullable=True),
        sa.Column("result", sa.LargeBinary(), nullable=True),
        sa.Column("result_content_type", sa.Text(), nullable=True),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("traceparent", sa.Text(), server_default="", nullable=False),
        sa.Column("tracestate", sa.Text(), server_default="", nullable=False),
        sa.Column("concurrency_key", sa.Text(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("replay_of", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_wfj_jobs_leases",
            ["lease_expires_at"],
            unique=False,
            postgresql_where=sa.text("status = 2"),
            sqlite_where=sa.text("status = 2"),
        )
        batch_op.create_index(
            "ix_wfj_jobs_ready",
            [
                "tenant_id",
                "job_type",
                "definition_id",
                sa.literal_column("priority DESC"),
                "due_at",
                "id",
            ],
            unique=False,
            postgresql_where=sa.text("status = 1"),
            sqlite_where=sa.text("status = 1"),
        )
        batch_op.create_index(
            "ux_wfj_jobs_idempotency",
            ["tenant_id", "idempotency_key"],
            unique=True,
            postgresql_where=sa.text("idempotency_key IS NOT NULL"),
            sqlite_where=sa.text("idempotency_key IS NOT NULL"),
        )

    op.create_table(
        "wfj_lanes",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("job_type", sa.Text(), nullable=False),
        sa.Column("definition_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "job_type", "definition_id"),
    )
    op.create_table(
        "wfj_pauses",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("kind", sa.SmallInteger(), nullable=False),
        sa.Column("tenant_id", sa.Text(), server_default="", nullable=False),
        sa.Column("value", sa.Text(), server_default="", nullable=False),
        sa.Column("actor", sa.Text(), server_default="", nullable=False),
        sa.Column("reason", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("lifted_at", sa.BigInteger(), nullable=True),
        sa.Column("lifted_by", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("wfj_pauses", schema=None) as batch_op:
        batch_op.create_index("ix_wfj_pauses_active", ["kind", "value", "lifted_at"], unique=False)

    op.create_table(
        "wfj_tenants",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("weight", sa.Integer(), server_default="1", nullable=False),
        sa.PrimaryKeyConstraint("tenant_id"),
    )
    op.create_table(
        "wfj_workers",
        sa.Column("worker_id", sa.Text(), nullable=False),
        sa.Column("coordinator_id", sa.Text(), nullable=False),
        sa.Column("hostname", sa.Text(), server_default="", nullable=False),
        sa.Column("pid", sa.Integer(), server_default="0", nullable=False),
        sa.Column("sdk_version", sa.Text(), server_default="", nullable=False),
        sa.Column("job_types", sa.Text(), server_default="[]", nullable=False),
        sa.Column("slots", sa.Integer(), server_default="0", nullable=False),
        sa.Column("connected_at", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("worker_id"),
    )


def downgrade() -> None:
    op.drop_table("wfj_workers")
    op.drop_table("wfj_tenants")
    with op.batch_alter_table("wfj_pauses", schema=None) as batch_op:
        batch_op.drop_index("ix_wfj_pauses_active")

    op.drop_table("wfj_pauses")
    op.drop_table("wfj_lanes")
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.drop_index(
            "ux_wfj_jobs_idempotency",
            postgresql_where=sa.text("idempotency_key IS NOT NULL"),
            sqlite_where=sa.text("idempotency_key IS NOT NULL"),
        )
        batch_op.drop_index(
            "ix_wfj_jobs_ready",
            postgresql_where=sa.text("status = 1"),
            sqlite_where=sa.text("status = 1"),
        )
        batch_op.drop_index(
            "ix_wfj_jobs_leases",
            postgresql_where=sa.text("status = 2"),
            sqlite_where=sa.text("status = 2"),
        )

    op.drop_table("wfj_jobs")
    op.drop_table("wfj_job_attempts")
    op.drop_table("wfj_concurrency_limits")
    op.drop_table("wfj_cluster_flags")
