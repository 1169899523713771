"""released attempts are counted apart instead of raising max_attempts

Revision ID: 0005
Revises: 0004

Jobs stored before this revision had ``max_attempts`` raised by one for every
attempt a worker released. The released attempts are counted now (from the
attempt history, outcome RELEASED) and taken back off ``max_attempts``, so
``attempt - released_attempts`` against ``max_attempts`` allows exactly what
the raised budget allowed.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_RELEASED = 5  # AttemptOutcome.RELEASED

_RELEASED_COUNT = (
    "(SELECT COUNT(*) FROM wfj_job_attempts a "
    f"WHERE a.job_id = wfj_jobs.id AND a.outcome = {_RELEASED})"
)


def upgrade() -> None:
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("released_attempts", sa.Integer(), server_default="0", nullable=False)
        )
    op.execute(
        f"UPDATE wfj_jobs SET released_attempts = {_RELEASED_COUNT} "
        f"WHERE id IN (SELECT job_id FROM wfj_job_attempts WHERE outcome = {_RELEASED})"
    )
    op.execute(
        "UPDATE wfj_jobs SET max_attempts = CASE WHEN max_attempts - released_attempts < 1 "
        "THEN 1 ELSE max_attempts - released_attempts END WHERE released_attempts > 0"
    )


def downgrade() -> None:
    op.execute(
        "UPDATE wfj_jobs SET max_attempts = max_attempts + released_attempts "
        "WHERE released_attempts > 0"
    )
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.drop_column("released_attempts")
