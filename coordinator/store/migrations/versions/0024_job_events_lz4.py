"""the job event log's arrays are compressed with lz4 (PostgreSQL)

Revision ID: 0024
Revises: 0023

A log row holds one array per event column for all the events of a
statement (migration 0015): a batch's row is kilobytes, so PostgreSQL
compresses it as it stores it, with pglz by default, and that compression
was a measured share of the server's CPU per job on the hot path (a claim,
a completion and an enqueue each write such a row). lz4 compresses these
arrays several times faster for somewhat larger rows. Rows written before
keep their compression (both read the same). A server built without lz4
keeps pglz: nothing changes there.
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_ARRAYS = (
    "kinds",
    "created_ats",
    "job_ids",
    "tenant_ids",
    "job_types",
    "definition_ids",
    "definition_versions",
    "instance_ids",
    "activity_ids",
    "activity_node_ids",
    "bookmark_ids",
    "correlation_ids",
    "statuses",
    "attempts",
    "due_ats",
    "errors",
    "error_kinds",
    "group_ids",
)


def _has_lz4() -> bool:
    return bool(
        op.get_bind()
        .exec_driver_sql(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        .scalar()
    )


def _set_compression(method: str) -> None:
    op.execute(
        "ALTER TABLE wfj_job_events "
        + ", ".join(f"ALTER COLUMN {c} SET COMPRESSION {method}" for c in _ARRAYS)
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql" and _has_lz4():
        _set_compression("lz4")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql" and _has_lz4():
        _set_compression("pglz")
