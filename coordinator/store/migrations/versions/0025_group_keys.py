"""job groups: an idempotency key of their own; retention finds a group by its completion

Revision ID: 0025
Revises: 0024

``wfj_groups.idempotency_key`` makes ``CreateGroup`` idempotent per tenant and
key (``ux_wfj_groups_idempotency``); ``member_ids`` keeps the ids of the
members such a group was created with (JSON), which a retry answers.
``ix_wfj_groups_completion`` finds the group of a completion job the
retention purge deletes, so the group goes with it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wfj_groups", sa.Column("idempotency_key", sa.Text))
    op.add_column("wfj_groups", sa.Column("member_ids", sa.Text))
    op.create_index(
        "ux_wfj_groups_idempotency",
        "wfj_groups",
        ["tenant_id", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
        sqlite_where=sa.text("idempotency_key IS NOT NULL"),
    )
    op.create_index(
        "ix_wfj_groups_completion",
        "wfj_groups",
        ["completion_job_id"],
        postgresql_where=sa.text("completion_job_id IS NOT NULL"),
        sqlite_where=sa.text("completion_job_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_wfj_groups_completion", table_name="wfj_groups")
    op.drop_index("ux_wfj_groups_idempotency", table_name="wfj_groups")
    with op.batch_alter_table("wfj_groups") as batch:
        batch.drop_column("member_ids")
        batch.drop_column("idempotency_key")
