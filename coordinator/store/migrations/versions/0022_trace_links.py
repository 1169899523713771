"""trace links: the W3C contexts a job's spans link to

Revision ID: 0022
Revises: 0021

``wfj_jobs.trace_links`` (a JSON list of traceparents, NULL for nearly every
job) holds what a group's completion job links its spans to: its members'
enqueue contexts (store/groups.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wfj_jobs", sa.Column("trace_links", sa.Text))


def downgrade() -> None:
    op.drop_column("wfj_jobs", "trace_links")
