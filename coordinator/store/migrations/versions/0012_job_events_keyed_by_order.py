"""the job event log is keyed by its order (PostgreSQL)

Revision ID: 0012
Revises: 0011

On PostgreSQL the log is read, resumed and purged in ``(ord, id)`` order; its
unique index on that order becomes the primary key and the separate index on
``id`` goes, so each event written maintains one index instead of two. SQLite
keeps ``id`` as its rowid (AUTOINCREMENT never reuses one) and the order index.
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE wfj_job_events DROP CONSTRAINT wfj_job_events_pkey")
    op.execute(
        "ALTER TABLE wfj_job_events ADD CONSTRAINT pk_wfj_job_events "
        "PRIMARY KEY USING INDEX ix_wfj_job_events_order"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE wfj_job_events DROP CONSTRAINT pk_wfj_job_events")
    op.execute("ALTER TABLE wfj_job_events ADD PRIMARY KEY (id)")
    op.create_index("ix_wfj_job_events_order", "wfj_job_events", ["ord", "id"], unique=True)
