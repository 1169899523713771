"""job type defaults

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "wfj_job_type_defaults",
        sa.Column("job_type", sa.Text(), nullable=False),
        sa.Column("retry_policy", sa.Text(), nullable=True),
        sa.Column("execution_timeout_ms", sa.BigInteger(), nullable=True),
        sa.Column("heartbeat_timeout_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("job_type"),
    )


def downgrade() -> None:
    op.drop_table("wfj_job_type_defaults")
