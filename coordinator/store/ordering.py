"""Ordering keys: jobs of one tenant and ``ordering_key`` run one at a time, in id order.

A job with an ordering key may be leased only when no job of its key is
RUNNING and no job of its key with a smaller id is PENDING, or FAULTED with
the blocking policy (``ordering_skip_failed`` false). ``ordering_allows`` is
that rule as SQL over a job row; every statement that leases (the candidate
reads, the one-statement claim, the guarded claim) includes it, so a stale
candidate list cannot lease a job behind its key, on any replica: whatever a
concurrent claimer does to the head (lease it, end it), the head is PENDING,
RUNNING or terminal, and only its terminal commit lets the next job through.

Each half is one probe of a small partial index (``ix_wfj_jobs_ordering_running``
over RUNNING rows with a key, ``ix_wfj_jobs_ordering_ahead`` over PENDING and
FAULTED rows with a key, keyed by (tenant, key, id)): deciding whether a job
may run costs the same however long its key's queue is.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from coordinator.model import JobStatus
from coordinator.store.base import StoreBase

_RUNNING = int(JobStatus.RUNNING)
_PENDING = int(JobStatus.PENDING)
_FAULTED = int(JobStatus.FAULTED)


def ordering_allows(alias: str) -> str:
    """SQL true when the job row ``alias`` is not held back by its ordering key."""
    return (
        f"({alias}.ordering_key IS NULL OR ("
        f"NOT EXISTS (SELECT 1 FROM wfj_jobs o1 WHERE o1.tenant_id = {alias}.tenant_id "
        f"AND o1.ordering_key = {alias}.ordering_key AND o1.status = {_RUNNING}) "
        f"AND NOT EXISTS (SELECT 1 FROM wfj_jobs o2 WHERE o2.tenant_id = {alias}.tenant_id "
        f"AND o2.ordering_key = {alias}.ordering_key AND o2.id < {alias}.id "
        f"AND o2.status IN ({_PENDING}, {_FAULTED}) "
        f"AND NOT (o2.status = {_FAULTED} AND o2.ordering_skip_failed))))"
    )


class OrderingQueries(StoreBase):
    """Reads over the jobs of an ordering key."""

    def job_ordering_blocker(self, tenant_id: str, ordering_key: str, job_id: str) -> Any:
        """The job that holds ``job_id`` back in its key: the key's RUNNING job,
        else its first earlier PENDING or blocking FAULTED job; None when none does.
        A row of (id, status)."""
        running = sa.text(
            f"SELECT id, status FROM wfj_jobs WHERE tenant_id = :tenant AND ordering_key = :key "
            f"AND status = {_RUNNING} AND id <> :id LIMIT 1"
        )
        ahead = sa.text(
            f"SELECT id, status FROM wfj_jobs WHERE tenant_id = :tenant AND ordering_key = :key "
            f"AND id < :id AND status IN ({_PENDING}, {_FAULTED}) "
            f"AND NOT (status = {_FAULTED} AND ordering_skip_failed) ORDER BY id LIMIT 1"
        )
        params = {"tenant": tenant_id, "key": ordering_key, "id": job_id}
        with self.tx() as conn:
            return conn.execute(running, params).first() or conn.execute(ahead, params).first()
