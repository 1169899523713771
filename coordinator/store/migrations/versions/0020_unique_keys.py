"""uniqueness keys: unique while, unique for a period, debounce

Revision ID: 0020
Revises: 0015

``wfj_unique_keys`` holds one row per (tenant, uniqueness key): the job the
key admitted last and what its rule needs to decide the next enqueue (the
window's end, or the debounce bound and count). Plain jobs never touch it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "wfj_unique_keys",
        sa.Column("tenant_id", sa.Text, primary_key=True),
        sa.Column("unique_key", sa.Text, primary_key=True),
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("rule", sa.SmallInteger, nullable=False),
        sa.Column("admitted_at", sa.BigInteger, nullable=False),
        sa.Column("window_ends_at", sa.BigInteger),
        sa.Column("debounced", sa.Integer, nullable=False, server_default="0"),
        sa.Column("debounced_at", sa.BigInteger),
        sa.Column("max_due_at", sa.BigInteger),
    )
    op.create_index("ix_wfj_unique_keys_job", "wfj_unique_keys", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_wfj_unique_keys_job", table_name="wfj_unique_keys")
    op.drop_table("wfj_unique_keys")
