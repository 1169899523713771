"""Coordinators SIGKILLed mid-run.

* one coordinator (SQLite and PostgreSQL) killed and restarted in place,
  several times: workers reconnect, nothing is lost or recorded twice;
* two replicas on PostgreSQL, one killed for good: workers fail over to the
  other, and jobs whose workers keep heartbeating through the survivor keep
  their leases (their history is a single COMPLETED attempt).
"""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa
from faults.harness import (
    CoordinatorProcess,
    WorkerPool,
    check_run,
    count_starts,
    count_status,
    enqueue_work,
    scaled,
    wait_all_completed,
)

from coordinator.model import AttemptOutcome, JobStatus
from coordinator.store import open_store
from coordinator.store.base import create_sa_engine
from wfj_testing import wait_until

pytestmark = pytest.mark.e2e


def test_coordinator_killed_and_restarted_loses_nothing(tmp_path, fault_database) -> None:
    total = scaled(2000)
    coordinator = CoordinatorProcess(fault_database, tmp_path)
    pool = WorkerPool(coordinator.target, tmp_path, 2, "--concurrency", "25")
    rng = random.Random(11)
    restarts = 3
    try:
        ids = enqueue_work(coordinator.target, total // 2, ms=20, heartbeat_timeout=10.0)
        for n in range(restarts):
            goal = count_starts(pool.records) + rng.randrange(200, 600)
            wait_until(lambda goal=goal: count_starts(pool.records) >= goal, 120, "progress")
            coordinator.kill()
            coordinator.start()
            if n == 0:
                # Jobs enqueued after a crash run as well.
                ids += enqueue_work(
                    coordinator.target, total - total // 2, ms=20, heartbeat_timeout=10.0
                )
        wait_all_completed(fault_database, total, 120)
    finally:
        pool.stop()
        coordinator.stop()
    check_run(fault_database, ids, pool.records, restarts, "coordinator dies")


def test_replica_killed_for_good_workers_fail_over(tmp_path, pg_url) -> None:
    total = scaled(2000)
    first = CoordinatorProcess(pg_url, tmp_path, name="first")
    second = CoordinatorProcess(pg_url, tmp_path, name="second")
    both = f"ipv4:{first.target},{second.target}"
    # Two workers prefer the first replica (pick_first over the list), two,
    # started later, spread their calls over both (round_robin).
    pool = WorkerPool(both, tmp_path, 2, "--concurrency", "25")
    balanced: WorkerPool | None = None
    try:
        # Long jobs, leased through the first replica before it dies, must
        # finish on their first attempt.
        long_ids = enqueue_work(
            first.target, 8, ms=8000, min_ms=8000, heartbeat_timeout=2.0, tenants=1
        )
        wait_until(
            lambda: count_status(pg_url, JobStatus.RUNNING) == len(long_ids),
            30,
            "the long jobs to be leased",
        )
        assert _lease_owners(pg_url, long_ids) <= {"worker-1", "worker-2"}
        balanced = WorkerPool(
            both, tmp_path, 2, "--concurrency", "25", "--round-robin", name="balanced"
        )
        ids = enqueue_work(second.target, total, ms=20)
        wait_until(lambda: count_starts(pool.records + balanced.records) >= 300, 60, "progress")
        assert _lease_owners(pg_url, long_ids) <= {"worker-1", "worker-2"}, "still running"
        first.kill()
        wait_all_completed(pg_url, total + len(long_ids), 120)
    finally:
        pool.stop()
        if balanced is not None:
            balanced.stop()
        first.stop()
        second.stop()
    records = pool.records + balanced.records
    check_run(pg_url, ids + long_ids, records, 1, "replica killed for good")
    histories = _histories(pg_url, long_ids)
    assert all(h == [int(AttemptOutcome.COMPLETED)] for h in histories.values()), histories


def _lease_owners(url: str, ids: list[str]) -> set[str]:
    engine = create_sa_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT lease_owner FROM wfj_jobs WHERE id IN :ids").bindparams(
                    sa.bindparam("ids", expanding=True)
                ),
                {"ids": ids},
            )
            return {r[0] for r in rows}
    finally:
        engine.dispose()


def _histories(url: str, ids: list[str]) -> dict[str, list[int]]:
    """Each job's attempt outcomes as ``GetJob`` shows them, oldest first."""
    store = open_store(url, pool_size=1)
    try:
        return {i: [a.outcome for a in store.job_attempts(i)] for i in ids}
    finally:
        store.dispose()
