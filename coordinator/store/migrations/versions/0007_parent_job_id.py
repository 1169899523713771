"""jobs record the job that enqueued them (child jobs)

Revision ID: 0007
Revises: 0006

``parent_job_id`` names the job whose handler enqueued this one (NULL for
jobs enqueued from outside a handler). ``ix_wfj_jobs_parent`` serves ListJobs
filtered by parent; it holds only child jobs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_job_id", sa.Text(), nullable=True))
    op.create_index(
        "ix_wfj_jobs_parent",
        "wfj_jobs",
        ["parent_job_id", "id"],
        postgresql_where=sa.text("parent_job_id IS NOT NULL"),
        sqlite_where=sa.text("parent_job_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_wfj_jobs_parent", table_name="wfj_jobs")
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.drop_column("parent_job_id")
