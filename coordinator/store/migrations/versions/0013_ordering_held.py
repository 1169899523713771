"""ordering keys: only the head of a key is a candidate for acquisition

Revision ID: 0013
Revises: 0012

``ordering_held`` marks a PENDING job that waits behind an earlier live job
of its ordering key (store/ordering.py). Held jobs leave the ready index and
the index of a key's waiting jobs, and get an index of their own, so finding
a job to lease never walks past a key's queue. Existing rows are backfilled
by the rule enqueue applies: a PENDING job of a key is held when the key has
a RUNNING job, or an earlier PENDING job, or an earlier FAULTED job that
holds the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# The index columns alembic's create_index takes: names, or expressions.
_IndexColumn = str | sa.ColumnElement[Any]

_READY_COLUMNS: list[_IndexColumn] = [
    "tenant_id",
    "job_type",
    "definition_id",
    sa.literal_column("priority DESC"),
    "due_at",
    "id",
]
_OLD_READY = "status = 1"
_NEW_READY = "status = 1 AND NOT ordering_held"
_OLD_AHEAD = "ordering_key IS NOT NULL AND status IN (1, 4)"
_NEW_AHEAD = "ordering_key IS NOT NULL AND status IN (1, 4) AND NOT ordering_held"

_BACKFILL = """
UPDATE wfj_jobs SET ordering_held = true
WHERE ordering_key IS NOT NULL AND status = 1
  AND (EXISTS (SELECT 1 FROM wfj_jobs o
               WHERE o.tenant_id = wfj_jobs.tenant_id AND o.ordering_key = wfj_jobs.ordering_key
                 AND o.status = 2)
       OR EXISTS (SELECT 1 FROM wfj_jobs o
                  WHERE o.tenant_id = wfj_jobs.tenant_id
                    AND o.ordering_key = wfj_jobs.ordering_key AND o.id < wfj_jobs.id
                    AND o.status IN (1, 4) AND NOT (o.status = 4 AND o.ordering_skip_failed)))
"""


def _index(name: str, columns: Sequence[_IndexColumn], where: str) -> None:
    op.create_index(
        name,
        "wfj_jobs",
        columns,
        postgresql_where=sa.text(where),
        sqlite_where=sa.text(where),
    )


def upgrade() -> None:
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("ordering_held", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    op.execute(_BACKFILL)
    op.drop_index("ix_wfj_jobs_ready", table_name="wfj_jobs")
    _index("ix_wfj_jobs_ready", _READY_COLUMNS, _NEW_READY)
    op.drop_index("ix_wfj_jobs_ordering_ahead", table_name="wfj_jobs")
    _index("ix_wfj_jobs_ordering_ahead", ["tenant_id", "ordering_key", "id"], _NEW_AHEAD)
    _index("ix_wfj_jobs_ordering_held", ["tenant_id", "ordering_key", "id"], "ordering_held")


def downgrade() -> None:
    op.drop_index("ix_wfj_jobs_ordering_held", table_name="wfj_jobs")
    op.drop_index("ix_wfj_jobs_ordering_ahead", table_name="wfj_jobs")
    _index("ix_wfj_jobs_ordering_ahead", ["tenant_id", "ordering_key", "id"], _OLD_AHEAD)
    op.drop_index("ix_wfj_jobs_ready", table_name="wfj_jobs")
    _index("ix_wfj_jobs_ready", _READY_COLUMNS, _OLD_READY)
    with op.batch_alter_table("wfj_jobs", schema=None) as batch_op:
        batch_op.drop_column("ordering_held")
