"""a completed first attempt is described by its job row, not an attempt row

Revision ID: 0009
Revises: 0008

From this revision a first attempt that completes its job writes no row in
``wfj_job_attempts``: the job row holds everything the row held (number 1,
worker, start, end, outcome COMPLETED, no error) and keeps the lease token of
the report that completed it (the row's ``reported_token``); the history, the
stats and the recognition of a resent report read it from there
(``store/schema.py``, ``first_attempt_completed``). The rows such completions
wrote before are deleted, their reported token moved onto the job row, so
every completed first attempt is counted once, from its job row. Downgrading
writes them back from the job rows.
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_COMPLETED_JOB = 3  # JobStatus.COMPLETED
_COMPLETED_ATTEMPT = 1  # AttemptOutcome.COMPLETED

_FIRST_ATTEMPT_COMPLETED = f"j.status = {_COMPLETED_JOB} AND j.attempt = 1"
_ITS_ROW = (
    "FROM wfj_job_attempts a WHERE a.job_id = wfj_jobs.id AND a.number = 1 "
    f"AND a.outcome = {_COMPLETED_ATTEMPT}"
)


def upgrade() -> None:
    op.execute(
        f"UPDATE wfj_jobs SET lease_token = (SELECT a.reported_token {_ITS_ROW}) "
        f"WHERE status = {_COMPLETED_JOB} AND attempt = 1 "
        f"AND EXISTS (SELECT 1 {_ITS_ROW} AND a.reported_token IS NOT NULL)"
    )
    op.execute(
        "DELETE FROM wfj_job_attempts WHERE number = 1 "
        f"AND outcome = {_COMPLETED_ATTEMPT} AND EXISTS (SELECT 1 FROM wfj_jobs j "
        f"WHERE j.id = wfj_job_attempts.job_id AND {_FIRST_ATTEMPT_COMPLETED})"
    )


def downgrade() -> None:
    op.execute(
        "INSERT INTO wfj_job_attempts "
        "(job_id, number, worker_id, started_at, ended_at, outcome, reported_token) "
        f"SELECT j.id, 1, j.lease_owner, j.started_at, j.finished_at, {_COMPLETED_ATTEMPT}, "
        f"j.lease_token FROM wfj_jobs j WHERE {_FIRST_ATTEMPT_COMPLETED} AND NOT EXISTS "
        "(SELECT 1 FROM wfj_job_attempts a WHERE a.job_id = j.id AND a.number = 1)"
    )
    op.execute(
        f"UPDATE wfj_jobs SET lease_token = NULL WHERE status = {_COMPLETED_JOB} AND attempt = 1"
    )
