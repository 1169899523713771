"""rate limits at acquisition

Revision ID: 0010
Revises: 0009

``wfj_rate_limits`` holds the rate limits operators set (N starts per period
with a burst, per tenant, job type, definition, concurrency key or category);
``wfj_rate_buckets`` the state of each limited scope value (the GCRA's
theoretical arrival time and the adaptive slowdown), read and written by every
claim under the scope's advisory lock so a limit holds across replicas.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "wfj_rate_limits",
        sa.Column("kind", sa.SmallInteger(), primary_key=True),
        sa.Column("value", sa.Text(), primary_key=True),
        sa.Column("starts", sa.Integer(), nullable=False),
        sa.Column("period_ms", sa.BigInteger(), nullable=False),
        sa.Column("burst", sa.Integer(), nullable=False),
    )
    op.create_table(
        "wfj_rate_buckets",
        sa.Column("kind", sa.SmallInteger(), primary_key=True),
        sa.Column("value", sa.Text(), primary_key=True),
        sa.Column("tat", sa.BigInteger(), nullable=False),
        sa.Column("slow_level", sa.SmallInteger(), nullable=False, server_default="0"),
        sa.Column("slowed_at", sa.BigInteger(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("wfj_rate_buckets")
    op.drop_table("wfj_rate_limits")
