"""worker registry keyed by (coordinator, worker id) with tenant scope; finished-jobs index

Revision ID: 0006
Revises: 0005

``wfj_workers`` was keyed by worker id alone, so workers of two replicas that
announce the same id overwrote each other's row. It is keyed by (coordinator
id, worker id) now and records the tenants each worker's credential covers.
The registry only mirrors open streams (every coordinator rewrites its rows at
its next sync), so the table is recreated empty rather than converted.

``ix_wfj_jobs_finished`` indexes terminal jobs by (status, finished_at), the
rows the retention purge looks for.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_FINISHED = "status IN (3, 4, 5)"  # COMPLETED, FAULTED, CANCELLED


def _workers_table(key: tuple[str, ...], with_tenants: bool) -> None:
    columns: list[sa.schema.SchemaItem] = [
        sa.Column("coordinator_id", sa.Text(), nullable=False),
        sa.Column("worker_id", sa.Text(), nullable=False),
        sa.Column("hostname", sa.Text(), server_default="", nullable=False),
        sa.Column("pid", sa.Integer(), server_default="0", nullable=False),
        sa.Column("sdk_version", sa.Text(), server_default="", nullable=False),
        sa.Column("job_types", sa.Text(), server_default="[]", nullable=False),
        sa.Column("slots", sa.Integer(), server_default="0", nullable=False),
        sa.Column("connected_at", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_at", sa.BigInteger(), nullable=False),
        sa.Column("draining", sa.Boolean(), server_default=sa.false(), nullable=False),
    ]
    if with_tenants:
        columns.append(sa.Column("tenants", sa.Text(), nullable=True))
    op.create_table("wfj_workers", *columns, sa.PrimaryKeyConstraint(*key))


def upgrade() -> None:
    op.drop_table("wfj_workers")
    _workers_table(("coordinator_id", "worker_id"), with_tenants=True)
    op.create_index(
        "ix_wfj_jobs_finished",
        "wfj_jobs",
        ["status", "finished_at"],
        postgresql_where=sa.text(_FINISHED),
        sqlite_where=sa.text(_FINISHED),
    )


def downgrade() -> None:
    op.drop_index("ix_wfj_jobs_finished", table_name="wfj_jobs")
    op.drop_table("wfj_workers")
    _workers_table(("worker_id",), with_tenants=False)
