"""the reason an operator gave for a cancel, kept on the job

Revision ID: 0016
Revises: 0018

``cancel_reason`` holds the reason a ``CancelJob`` or ``BulkCancelJobs``
gave, from the request on: a RUNNING job's attempt may end later with an
error of its own (its handler returned, failed or handed the job back), and
the job's view still says why it was cancelled. A retry clears it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wfj_jobs", sa.Column("cancel_reason", sa.Text))


def downgrade() -> None:
    # A plain ALTER TABLE ... DROP COLUMN (SQLite 3.35 and later), not a batch
    # table copy: the copy would drop the ordering trigger that 0018 made.
    op.drop_column("wfj_jobs", "cancel_reason")
