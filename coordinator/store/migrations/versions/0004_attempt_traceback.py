"""attempts keep the traceback a worker reported

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("wfj_job_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("traceback", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("wfj_job_attempts", schema=None) as batch_op:
        batch_op.drop_column("traceback")
