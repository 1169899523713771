"""job events carry their job's group id

Revision ID: 0023
Revises: 0022

An event copies its job's ``group_id`` (NULL for a job outside any group), so
``WatchJobEvents`` can say and filter by which group a change belongs to. On
PostgreSQL the log row gets one more array, ``group_ids``; rows written
before it hold NULL there and read as events without a group (``unnest``
pads a missing array with NULLs). SQLite's one-row-per-event log gets a
``group_id`` column.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE wfj_job_events ADD COLUMN group_ids text[]")
    else:
        op.add_column("wfj_job_events", sa.Column("group_id", sa.Text))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE wfj_job_events DROP COLUMN group_ids")
    else:
        op.drop_column("wfj_job_events", "group_id")
