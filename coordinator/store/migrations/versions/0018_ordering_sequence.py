"""ordering keys: a key's jobs run in the order the database numbered them

Revision ID: 0018
Revises: 0020

``ordering_seq`` is a number the database gives every job as it is stored
(PostgreSQL: a sequence, the column's default; SQLite: one more than the
highest stored, by trigger), so a key's jobs run in the order their enqueues
were stored, whichever replica's host clock made their ids. Enqueues of one
key take the key's lock before they insert (store/ordering.py), so within a
key the numbers follow commit order. Existing jobs of a key are numbered in
their id order, which was their order until now.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0020"
branch_labels = None
depends_on = None

_AHEAD = "ordering_key IS NOT NULL AND status IN (1, 4) AND NOT ordering_held"
_NUMBER_EXISTING = (
    "UPDATE wfj_jobs SET ordering_seq = o.n FROM (SELECT id, row_number() "
    "OVER (ORDER BY id) AS n FROM wfj_jobs WHERE ordering_key IS NOT NULL) AS o "
    "WHERE wfj_jobs.id = o.id"
)
# SQLite: a stored job of a key without a number gets one more than the
# highest (found through ix_wfj_jobs_ordering_seq). One writer at a time.
_SQLITE_TRIGGER = """
CREATE TRIGGER wfj_jobs_ordering_seq AFTER INSERT ON wfj_jobs
WHEN NEW.ordering_key IS NOT NULL AND NEW.ordering_seq IS NULL
BEGIN
    UPDATE wfj_jobs SET ordering_seq = (
        SELECT COALESCE(MAX(ordering_seq), 0) + 1 FROM wfj_jobs WHERE ordering_seq IS NOT NULL)
    WHERE id = NEW.id;
END
"""


def _index(name: str, columns: list[str], where: str) -> None:
    op.create_index(
        name, "wfj_jobs", columns, postgresql_where=sa.text(where), sqlite_where=sa.text(where)
    )


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.add_column("wfj_jobs", sa.Column("ordering_seq", sa.BigInteger(), nullable=True))
    op.execute(_NUMBER_EXISTING)
    if postgres:
        # CACHE 1 (the default): numbers follow the order they are drawn in
        # across sessions, not per-session blocks.
        op.execute("CREATE SEQUENCE wfj_jobs_ordering_seq OWNED BY wfj_jobs.ordering_seq")
        op.execute(
            "SELECT setval('wfj_jobs_ordering_seq', "
            "COALESCE((SELECT max(ordering_seq) FROM wfj_jobs), 0) + 1, false)"
        )
        op.execute(
            "ALTER TABLE wfj_jobs ALTER COLUMN ordering_seq "
            "SET DEFAULT nextval('wfj_jobs_ordering_seq')"
        )
    else:
        _index("ix_wfj_jobs_ordering_seq", ["ordering_seq"], "ordering_seq IS NOT NULL")
        op.execute(_SQLITE_TRIGGER)
    op.drop_index("ix_wfj_jobs_ordering_ahead", table_name="wfj_jobs")
    _index("ix_wfj_jobs_ordering_ahead", ["tenant_id", "ordering_key", "ordering_seq"], _AHEAD)
    op.drop_index("ix_wfj_jobs_ordering_held", table_name="wfj_jobs")
    _index(
        "ix_wfj_jobs_ordering_held", ["tenant_id", "ordering_key", "ordering_seq"], "ordering_held"
    )


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.drop_index("ix_wfj_jobs_ordering_held", table_name="wfj_jobs")
    _index("ix_wfj_jobs_ordering_held", ["tenant_id", "ordering_key", "id"], "ordering_held")
    op.drop_index("ix_wfj_jobs_ordering_ahead", table_name="wfj_jobs")
    _index("ix_wfj_jobs_ordering_ahead", ["tenant_id", "ordering_key", "id"], _AHEAD)
    if not postgres:
        op.execute("DROP TRIGGER wfj_jobs_ordering_seq")
        op.drop_index("ix_wfj_jobs_ordering_seq", table_name="wfj_jobs")
    op.drop_column("wfj_jobs", "ordering_seq")
