"""fairness weights per category within a tenant; the ready index is keyed by category

Revision ID: 0014
Revises: 0013

``wfj_category_weights`` holds the weights set per (tenant, category). The
ready index gains ``category`` after the lane columns, so acquisition reads
the head of each (lane, category) with one index probe each, whatever the
size of the other categories' backlogs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# The ready index holds PENDING jobs not held behind their ordering key (0013).
READY = sa.text("status = 1 AND NOT ordering_held")


def _ready_index(*columns: str) -> None:
    op.create_index(
        "ix_wfj_jobs_ready",
        "wfj_jobs",
        [sa.literal_column(c) if " " in c else c for c in columns],
        postgresql_where=READY,
        sqlite_where=READY,
    )


def upgrade() -> None:
    op.create_table(
        "wfj_category_weights",
        sa.Column("tenant_id", sa.Text, primary_key=True),
        sa.Column("category", sa.SmallInteger, primary_key=True),
        sa.Column("weight", sa.Integer, nullable=False),
    )
    op.drop_index("ix_wfj_jobs_ready", table_name="wfj_jobs")
    _ready_index(
        "tenant_id", "job_type", "definition_id", "category", "priority DESC", "due_at", "id"
    )


def downgrade() -> None:
    op.drop_index("ix_wfj_jobs_ready", table_name="wfj_jobs")
    _ready_index("tenant_id", "job_type", "definition_id", "priority DESC", "due_at", "id")
    op.drop_table("wfj_category_weights")
