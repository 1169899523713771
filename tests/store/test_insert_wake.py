"""The insert of single enqueues wakes the replicas only for jobs stored PENDING.

A job leased at insert (direct dispatch) has nothing left to acquire: its
commit sends no ``wfj_wake`` and so takes no notify lock (PostgreSQL).
"""

from __future__ import annotations

import psycopg
import pytest

from coordinator.model import DirectLeases, JobStatus
from coordinator.store import Store
from coordinator.store.base import wake_payload
from wfj_testing import T0, make_job


def test_only_jobs_stored_pending_wake_the_replicas(store: Store) -> None:
    if not store.is_postgres:
        pytest.skip("SQLite has no LISTEN/NOTIFY; one coordinator wakes itself")
    store.job_insert_many([make_job()])  # the lane becomes known: one statement
    raw = store.url.replace("postgresql+psycopg://", "postgresql://")
    leased, later = make_job(due_at=T0), make_job(due_at=T0 + 3_600 * 1_000_000)
    direct = DirectLeases({leased.id: "w-idle"}, "tok-direct", T0, 30_000)
    with psycopg.connect(raw, autocommit=True) as listener:
        listener.execute("LISTEN wfj_wake")
        store.job_insert_many([leased], direct)
        store.job_insert_many([later])
        # Notifications arrive in commit order: the first is the PENDING job's.
        [first] = list(listener.notifies(timeout=10, stop_after=1))
    assert first.payload == wake_payload([later.due_at])
    row = store.job_get(leased.id)
    assert row is not None and row.status == JobStatus.RUNNING
