"""ordering keys: jobs of one tenant and key run one at a time, in id order

Revision ID: 0011
Revises: 0010

``ordering_key`` names the job's sequence; ``ordering_skip_failed`` is the
failure policy fixed at enqueue from the job type's defaults (false: a FAULTED
job holds its key back until it is resolved; true: the key moves on).
``wfj_job_type_defaults.ordering_failure`` stores that policy per job type.
Two partial indexes answer "is something of this key running" and "is an
earlier job of this key waiting or holding it" with one probe each.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_RUNNING = "ordering_key IS NOT NULL AND status = 2"
_AHEAD = "ordering_key IS NOT NULL AND status IN (1, 4)"


def upgrade() -> None:
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ordering_key", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column(
                "ordering_skip_failed", sa.Boolean(), server_default=sa.false(), nullable=False
            )
        )
    with op.batch_alter_table("wfj_job_type_defaults", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ordering_failure", sa.SmallInteger(), nullable=True))
    op.create_index(
        "ix_wfj_jobs_ordering_running",
        "wfj_jobs",
        ["tenant_id", "ordering_key"],
        postgresql_where=sa.text(_RUNNING),
        sqlite_where=sa.text(_RUNNING),
    )
    op.create_index(
        "ix_wfj_jobs_ordering_ahead",
        "wfj_jobs",
        ["tenant_id", "ordering_key", "id"],
        postgresql_where=sa.text(_AHEAD),
        sqlite_where=sa.text(_AHEAD),
    )


def downgrade() -> None:
    op.drop_index("ix_wfj_jobs_ordering_ahead", table_name="wfj_jobs")
    op.drop_index("ix_wfj_jobs_ordering_running", table_name="wfj_jobs")
    with op.batch_alter_table("wfj_job_type_defaults", schema=None) as batch_op:
        batch_op.drop_column("ordering_failure")
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.drop_column("ordering_skip_failed")
        batch_op.drop_column("ordering_key")
