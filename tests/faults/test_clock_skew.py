"""Two replicas whose host clocks disagree by 30 seconds.

Replica ``ahead`` runs on a host whose wall clock is 30 s fast
(``skewed_coordinator.py``); replica ``right`` on a correct one. Workers that
talk only to ``right`` hold long jobs with a 2 s heartbeat timeout, and jobs due
a few seconds from now are enqueued while a worker talks only to ``ahead``.
Time for leases and due times comes from the database (``DatabaseClock``), so:

* ``ahead``'s lease reaper never takes a live lease (no attempt ends
  LEASE_EXPIRED, no extra execution), and
* ``ahead`` hands out no job before its due time (every start is at most
  ``TOLERANCE_S`` early, the allowance in docs/design.md "Where time comes from").

With each replica on its own host clock both fail: ``ahead`` sees every lease
``right`` granted as 28 s overdue and every due job as due.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from faults.harness import (
    CoordinatorProcess,
    WorkerPool,
    check_run,
    count_status,
    enqueue_work,
    read_start_times,
    scaled,
    wait_all_completed,
)

from coordinator.model import AttemptOutcome, JobStatus
from coordinator.store.base import create_sa_engine
from wfj_testing import wait_until
from worker_sdk import JobRequest, SchedulerClient

pytestmark = pytest.mark.e2e

SKEW_S = 30
# How early a due job may start, measured against the worker's own (correct) clock.
TOLERANCE_S = 0.25
SKEWED = Path(__file__).resolve().parent / "skewed_coordinator.py"


def test_replica_with_clock_30s_ahead_reclaims_nothing_early(tmp_path, pg_url) -> None:
    right = CoordinatorProcess(pg_url, tmp_path, name="right")
    ahead = CoordinatorProcess(
        pg_url,
        tmp_path,
        name="ahead",
        program=SKEWED,
        env={"WFJOBS_TEST_CLOCK_SKEW_S": str(SKEW_S)},
    )
    holders = WorkerPool(right.target, tmp_path, 2, "--concurrency", "20", name="holder")
    early: WorkerPool | None = None
    try:
        # Long jobs leased and heartbeated through the correct replica.
        long_ids = enqueue_work(right.target, 30, ms=4000, min_ms=4000, heartbeat_timeout=2.0)
        wait_until(
            lambda: count_status(pg_url, JobStatus.RUNNING) == len(long_ids),
            30,
            "the long jobs to be leased",
        )
        # A worker on the fast replica while those leases are live, and jobs
        # due in a few seconds.
        early = WorkerPool(ahead.target, tmp_path, 1, "--concurrency", "50", name="ahead")
        due = datetime.now(UTC) + timedelta(seconds=3)
        with SchedulerClient(right.target) as scheduler:
            due_ids = [
                r.job_id
                for r in scheduler.enqueue_batch(
                    [
                        JobRequest("work", {"n": i}, tenant_id="due", due=due, max_attempts=100)
                        for i in range(scaled(40))
                    ]
                )
            ]
        ids = long_ids + due_ids
        wait_all_completed(pg_url, len(ids), 60)
    finally:
        holders.stop()
        if early is not None:
            early.stop()
        right.stop()
        ahead.stop()
    records = holders.records + (early.records if early is not None else [])
    starts = read_start_times(records)
    due_us = int(due.timestamp() * 1_000_000)
    earliest = min(starts[j] for j in due_ids)
    early_by = (due_us - earliest) / 1e6
    expired = _lease_expiries(pg_url)
    print(f"\n[clock skew] skew={SKEW_S}s earliest due start={-early_by:+.3f}s vs due time")
    check_run(pg_url, ids, records, 1, "clock skew")
    assert expired == 0, f"{expired} live lease(s) taken by the replica whose clock is ahead"
    assert early_by <= TOLERANCE_S, f"a due job started {early_by:.3f}s before its due time"
    assert "ahead of the database" in ahead.log_text(), "the fast replica did not notice its clock"


def _lease_expiries(url: str) -> int:
    engine = create_sa_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text("SELECT count(*) FROM wfj_job_attempts WHERE outcome = :o"),
                    {"o": int(AttemptOutcome.LEASE_EXPIRED)},
                ).scalar_one()
            )
    finally:
        engine.dispose()


def test_a_key_runs_in_enqueue_order_across_replicas_whose_clocks_disagree(
    tmp_path, pg_url
) -> None:
    # B is enqueued through the correct replica, then C through one whose
    # host clock is 5 s behind (its ids sort before B's): B must run first.
    right = CoordinatorProcess(pg_url, tmp_path, name="right")
    behind = CoordinatorProcess(
        pg_url,
        tmp_path,
        name="behind",
        program=SKEWED,
        env={"WFJOBS_TEST_CLOCK_SKEW_S": "-5"},
    )
    pool: WorkerPool | None = None
    try:

        def enqueue(target: str, n: int) -> str:
            with SchedulerClient(target) as scheduler:
                request = JobRequest(
                    "work", {"n": n}, tenant_id="ordered", ordering_key="account-7"
                )
                return scheduler.enqueue_batch([request])[0].job_id

        head = enqueue(right.target, 0)  # holds the key while B and C are enqueued
        b = enqueue(right.target, 1)
        c = enqueue(behind.target, 2)
        assert c < b, "the replica behind did not make an earlier id"
        pool = WorkerPool(right.target, tmp_path, 1, "--concurrency", "10", name="ordered")
        wait_all_completed(pg_url, 3, 60)
    finally:
        if pool is not None:
            pool.stop()
        right.stop()
        behind.stop()
    starts = read_start_times(pool.records)
    order = sorted((head, b, c), key=lambda job_id: starts[job_id])
    print(
        f"\n[clock skew, ordering key] run order {['head', 'B', 'C']} expected, got "
        f"{[{head: 'head', b: 'B', c: 'C'}[j] for j in order]}"
    )
    assert order == [head, b, c], "a job of the key ran before one enqueued earlier"
    check_run(pg_url, [head, b, c], pool.records, 0, "clock skew, ordering key")
