"""job groups: members carry their group; a group names its completion job

Revision ID: 0021
Revises: 0016

``wfj_jobs.group_id`` names the group a job is a member of (NULL for nearly
every job); ``ix_wfj_jobs_group`` finds a group's members that have not
ended with one probe. ``wfj_groups`` holds each group's state and the
completion job it enqueues once every member has ended.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wfj_jobs", sa.Column("group_id", sa.Text))
    op.create_index(
        "ix_wfj_jobs_group",
        "wfj_jobs",
        ["group_id", "status"],
        postgresql_where=sa.text("group_id IS NOT NULL"),
        sqlite_where=sa.text("group_id IS NOT NULL"),
    )
    op.create_table(
        "wfj_groups",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("status", sa.SmallInteger, nullable=False),
        sa.Column("completion", sa.Text, nullable=False),
        sa.Column("completion_job_id", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("closed_at", sa.BigInteger),
        sa.Column("completed_at", sa.BigInteger),
    )


def downgrade() -> None:
    op.drop_table("wfj_groups")
    op.drop_index("ix_wfj_jobs_group", table_name="wfj_jobs")
    op.drop_column("wfj_jobs", "group_id")
