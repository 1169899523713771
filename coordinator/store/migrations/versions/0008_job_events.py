"""the job event log; attempts remember the lease token of the report that ended them

Revision ID: 0008
Revises: 0007

``wfj_job_events`` is the durable, ordered log of job state changes, written
in the same transaction as each change (see docs/design.md, "The job event
log"). Its order is ``(ord, id)``: ``id`` comes from an identity column
(SQLite: AUTOINCREMENT, so ids are never reused after a purge), ``ord`` is the
writing transaction's id on PostgreSQL (0 on SQLite, whose single writer
commits in id order). ``wfj_jobs.event_tx`` holds the ``ord`` of a job's last
event, so a later event of the same job never sorts before it.

``wfj_job_attempts.reported_token`` is the lease token of the outcome report
that ended the attempt (NULL when the coordinator ended it: lease expiry,
timeouts, unlocks, hand-backs), so a resent report is recognised.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_XID = "(pg_current_xact_id()::text::bigint)"


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        # A constant default adds the column without rewriting the table;
        # new rows take the writing transaction's id (set just below).
        batch_op.add_column(
            sa.Column("event_tx", sa.BigInteger(), server_default="0", nullable=False)
        )
    with op.batch_alter_table("wfj_job_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reported_token", sa.Text(), nullable=True))
    if postgres:
        op.execute(f"ALTER TABLE wfj_jobs ALTER COLUMN event_tx SET DEFAULT {_XID}")
    op.create_table(
        "wfj_job_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            *([sa.Identity()] if postgres else []),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column(
            "ord",
            sa.BigInteger(),
            nullable=False,
            server_default=sa.text(_XID if postgres else "0"),
        ),
        sa.Column("kind", sa.SmallInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("job_type", sa.Text(), nullable=False),
        sa.Column("definition_id", sa.Text(), nullable=False, server_default=""),
        sa.Column("definition_version", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("instance_id", sa.Text(), nullable=False, server_default=""),
        sa.Column("activity_id", sa.Text(), nullable=False, server_default=""),
        sa.Column("activity_node_id", sa.Text(), nullable=False, server_default=""),
        sa.Column("bookmark_id", sa.Text(), nullable=False, server_default=""),
        sa.Column("correlation_id", sa.Text(), nullable=False, server_default=""),
        sa.Column("status", sa.SmallInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("due_at", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_kind", sa.Text(), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_wfj_job_events_order", "wfj_job_events", ["ord", "id"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_wfj_job_events_order", table_name="wfj_job_events")
    op.drop_table("wfj_job_events")
    with op.batch_alter_table("wfj_job_attempts", schema=None) as batch_op:
        batch_op.drop_column("reported_token")
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.drop_column("event_tx")
